//! 0.3's objects translated to and from 1.0's ProtoJSON, in either of 0.3's JSON spellings
//! ([`Style`]): one walk over the objects, the spellings differing only at the leaves (parts,
//! states, roles, `kind`, a push config's wrapper, a send configuration's push field).
//!
//! Reading 0.3 (`*_in`) is strict where the meaning would be lost (a part of no known kind, a
//! role or state 0.3 does not have: a [`Violation`] naming the field) and lenient elsewhere
//! (fields 0.3 added later, and 1.0's spellings where they are unambiguous, pass); writing
//! 0.3 (`*_out`) cannot fail: what 0.3 cannot say is left out (a 1.0 part's `filename` on
//! 0.3's proto, which has none) or written as its nearest (`unknown` for a state of no 0.3
//! name; a non-object `data` wrapped as `{"value": ...}` with `data_part_compat`, as a2a-sdk
//! 1.3's compatibility layer writes it).

use serde_json::{Map, Value};

use crate::protocol::a2a::Method;
use crate::protocol::Violation;

/// Which of 0.3's JSON spellings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// a2a.json's (JSON-RPC): `kind`, `input-required`, `user`.
    Json,
    /// The JSON of a2a.proto 0.3 (HTTP+JSON): `content`, `TASK_STATE_CANCELLED`, `ROLE_USER`.
    Proto,
}

type Obj = Map<String, Value>;
type In<T> = Result<T, Violation>;

/// A violation at `at` (a JSON pointer relative to what was being read).
fn bad(at: &str, message: impl Into<String>) -> Violation {
    Violation::new(at, "a2a-0.3", message)
}

/// `v` under `prefix`: a violation found inside a member, named from the outer object.
fn under(mut v: Violation, prefix: &str) -> Violation {
    v.instance_path.insert_str(0, prefix);
    v
}

fn object(v: Value, what: &str) -> In<Obj> {
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
fn some(v: Option<Value>) -> Option<Value> {
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

fn each_out(s: Style, v: Value, f: fn(Style, Value) -> Value) -> Value {
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

// ---------------------------------------------------------------------------------------------
// Push configs

/// 0.3's PushNotificationConfig (`{id, url, token, authentication: {schemes, credentials}}`)
/// as the members of 1.0's flat TaskPushNotificationConfig, into `out`.
fn push_in(v: Value, out: &mut Obj) -> In<()> {
    let mut c = object(v, "a PushNotificationConfig")?;
    for k in ["id", "url", "token"] {
        if let Some(x) = some(c.remove(k)) {
            out.insert(k.to_owned(), x);
        }
    }
    if let Some(auth) = some(c.remove("authentication")) {
        let mut a = object(auth, "authentication").map_err(|v| under(v, "/authentication"))?;
        let mut v1 = Obj::new();
        let scheme = match a.remove("schemes") {
            Some(Value::Array(s)) => s.into_iter().next(),
            _ => a.remove("scheme"),
        };
        if let Some(scheme) = scheme {
            v1.insert("scheme".to_owned(), scheme);
        }
        if let Some(c) = some(a.remove("credentials")) {
            v1.insert("credentials".to_owned(), c);
        }
        out.insert("authentication".to_owned(), Value::Object(v1));
    }
    Ok(())
}

/// The 0.3 PushNotificationConfig of a 1.0 TaskPushNotificationConfig.
fn push_out(c: &Obj) -> Value {
    let mut out = Obj::new();
    for k in ["id", "url", "token"] {
        if let Some(x) = c.get(k) {
            out.insert(k.to_owned(), x.clone());
        }
    }
    if let Some(a) = c.get("authentication").and_then(Value::as_object) {
        let mut auth = Obj::new();
        let schemes = a.get("scheme").map_or_else(Vec::new, |s| vec![s.clone()]);
        auth.insert("schemes".to_owned(), Value::Array(schemes));
        if let Some(cr) = a.get("credentials") {
            auth.insert("credentials".to_owned(), cr.clone());
        }
        out.insert("authentication".to_owned(), Value::Object(auth));
    }
    Value::Object(out)
}

/// A 0.3 TaskPushNotificationConfig (a2a.json: `{taskId, pushNotificationConfig}`; proto:
/// `{name: "tasks/{t}/pushNotificationConfigs/{id}", pushNotificationConfig}`) as 1.0's.
pub fn task_push_in(s: Style, v: Value) -> In<Value> {
    let mut c = object(v, "a TaskPushNotificationConfig")?;
    let mut out = Obj::new();
    match s {
        Style::Json => {
            if let Some(t) = some(c.remove("taskId")) {
                out.insert("taskId".to_owned(), t);
            }
        }
        Style::Proto => {
            if let Some(name) = c.remove("name").as_ref().and_then(Value::as_str) {
                let mut segs = name.split('/');
                if let (Some("tasks"), Some(t)) = (segs.next(), segs.next()) {
                    out.insert("taskId".to_owned(), Value::from(t));
                }
                if let (Some("pushNotificationConfigs"), Some(id)) = (segs.next(), segs.next()) {
                    out.insert("id".to_owned(), Value::from(id));
                }
            }
        }
    }
    let pnc = c.remove("pushNotificationConfig").ok_or_else(|| {
        bad(
            "/pushNotificationConfig",
            "a pushNotificationConfig is required",
        )
    })?;
    push_in(pnc, &mut out).map_err(|v| under(v, "/pushNotificationConfig"))?;
    Ok(Value::Object(out))
}

/// A 1.0 TaskPushNotificationConfig as 0.3's.
pub fn task_push_out(s: Style, v: &Value) -> Value {
    let empty = Obj::new();
    let c = v.as_object().unwrap_or(&empty);
    let task = c.get("taskId").and_then(Value::as_str).unwrap_or("");
    let mut out = Obj::new();
    match s {
        Style::Json => {
            out.insert("taskId".to_owned(), Value::from(task));
        }
        Style::Proto => {
            let id = c.get("id").and_then(Value::as_str).unwrap_or("");
            out.insert(
                "name".to_owned(),
                Value::from(format!("tasks/{task}/pushNotificationConfigs/{id}")),
            );
        }
    }
    out.insert("pushNotificationConfig".to_owned(), push_out(c));
    Value::Object(out)
}

// ---------------------------------------------------------------------------------------------
// Send requests

/// The member of a send configuration holding its push config.
fn push_key(s: Style) -> &'static str {
    match s {
        Style::Json => "pushNotificationConfig",
        Style::Proto => "pushNotification",
    }
}

/// 0.3's MessageSendParams (a2a.json) or SendMessageRequest (proto) as 1.0's
/// SendMessageRequest: `blocking` is 1.0's `returnImmediately` negated (absent from a2a.json,
/// it blocks; absent from a proto configuration, it does not: proto3 leaves `false` out), a
/// `historyLength` of 0 (0.3's "all") is left out.
pub fn send_in(s: Style, mut p: Obj) -> In<Obj> {
    let mut out = Obj::new();
    let (key, mut message) = p
        .remove_entry("message")
        .ok_or_else(|| bad("/message", "a message is required"))?;
    message = message_in(s, message).map_err(|v| under(v, "/message"))?;
    out.insert(key, message);
    if let Some(c) = some(p.remove("configuration")) {
        let mut c = object(c, "configuration").map_err(|v| under(v, "/configuration"))?;
        let mut v1 = Obj::new();
        if let Some(m) = some(c.remove("acceptedOutputModes")) {
            v1.insert("acceptedOutputModes".to_owned(), m);
        }
        // On the proto's JSON a `false` is left out (a2a-sdk 0.3 writes it so), so a
        // configuration without `blocking` does not block, as 0.3's servers read it there.
        let blocking = c.remove("blocking").as_ref().and_then(Value::as_bool);
        match (blocking, s) {
            (Some(b), _) => {
                v1.insert("returnImmediately".to_owned(), Value::Bool(!b));
            }
            (None, Style::Proto) => {
                v1.insert("returnImmediately".to_owned(), Value::Bool(true));
            }
            (None, Style::Json) => {}
        }
        if let Some(h) = some(c.remove("historyLength")).filter(|h| h.as_i64() != Some(0)) {
            v1.insert("historyLength".to_owned(), h);
        }
        if let Some(push) = some(c.remove(push_key(s))) {
            let mut tp = Obj::new();
            push_in(push, &mut tp)
                .map_err(|v| under(v, &format!("/configuration/{}", push_key(s))))?;
            v1.insert("taskPushNotificationConfig".to_owned(), Value::Object(tp));
        }
        out.insert("configuration".to_owned(), Value::Object(v1));
    }
    if let Some(m) = some(p.remove("metadata")) {
        out.insert("metadata".to_owned(), m);
    }
    Ok(out)
}

/// 1.0's SendMessageRequest as 0.3's (the tenant left out: 0.3 has none).
pub fn send_out(s: Style, p: &Obj) -> Value {
    let mut out = Obj::new();
    if let Some(m) = p.get("message") {
        out.insert("message".to_owned(), message_out(s, m.clone()));
    }
    let c = p.get("configuration").and_then(Value::as_object);
    let mut v03 = Obj::new();
    let immediately = c
        .and_then(|c| c.get("returnImmediately"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    v03.insert("blocking".to_owned(), Value::Bool(!immediately));
    if let Some(c) = c {
        if let Some(m) = c.get("acceptedOutputModes") {
            v03.insert("acceptedOutputModes".to_owned(), m.clone());
        }
        if let Some(h) = c.get("historyLength") {
            v03.insert("historyLength".to_owned(), h.clone());
        }
        if let Some(tp) = c
            .get("taskPushNotificationConfig")
            .and_then(Value::as_object)
        {
            v03.insert(push_key(s).to_owned(), push_out(tp));
        }
    }
    out.insert("configuration".to_owned(), Value::Object(v03));
    if let Some(m) = p.get("metadata") {
        out.insert("metadata".to_owned(), m.clone());
    }
    Value::Object(out)
}

// ---------------------------------------------------------------------------------------------
// Answers, by method

/// A 1.0 response message of `method` as 0.3 writes it (`Json`: the JSON-RPC `result`;
/// `Proto`: the HTTP+JSON body).
pub fn answer_out(s: Style, method: Method, v: Value) -> Value {
    match method {
        Method::SendMessage | Method::SendStreamingMessage | Method::SubscribeToTask => {
            event_out(s, v)
        }
        Method::GetTask | Method::CancelTask => task_out(s, v),
        Method::CreateTaskPushNotificationConfig | Method::GetTaskPushNotificationConfig => {
            task_push_out(s, &v)
        }
        Method::ListTaskPushNotificationConfigs => {
            let configs: Vec<Value> = v
                .get("configs")
                .and_then(Value::as_array)
                .map(|c| c.iter().map(|c| task_push_out(s, c)).collect())
                .unwrap_or_default();
            match s {
                Style::Json => Value::Array(configs),
                Style::Proto => {
                    let mut out = Obj::new();
                    out.insert("configs".to_owned(), Value::Array(configs));
                    if let Some(t) = v.get("nextPageToken") {
                        out.insert("nextPageToken".to_owned(), t.clone());
                    }
                    Value::Object(out)
                }
            }
        }
        Method::DeleteTaskPushNotificationConfig => match s {
            Style::Json => Value::Null,
            Style::Proto => Value::Object(Obj::new()),
        },
        Method::ListTasks => {
            let Value::Object(mut o) = v else {
                return v;
            };
            if let Some(tasks) = o.remove("tasks") {
                o.insert("tasks".to_owned(), each_out(s, tasks, task_out));
            }
            Value::Object(o)
        }
        // The served card already carries 0.3's fields beside 1.0's.
        Method::GetExtendedAgentCard => v,
    }
}

/// A 0.3 agent's answer to `method` as 1.0's response message.
pub fn answer_in(s: Style, method: Method, v: Value) -> In<Value> {
    match method {
        Method::SendMessage | Method::SendStreamingMessage | Method::SubscribeToTask => {
            event_in(s, v)
        }
        Method::GetTask | Method::CancelTask => task_in(s, v),
        Method::CreateTaskPushNotificationConfig | Method::GetTaskPushNotificationConfig => {
            task_push_in(s, v)
        }
        Method::ListTaskPushNotificationConfigs => {
            let list = match (s, v) {
                (_, Value::Array(a)) => a,
                (_, Value::Object(mut o)) => match o.remove("configs") {
                    Some(Value::Array(a)) => a,
                    _ => Vec::new(),
                },
                _ => Vec::new(),
            };
            let configs = list
                .into_iter()
                .enumerate()
                .map(|(i, c)| task_push_in(s, c).map_err(|v| under(v, &format!("/{i}"))))
                .collect::<In<Vec<Value>>>()?;
            Ok(Value::Object(Obj::from_iter([(
                "configs".to_owned(),
                Value::Array(configs),
            )])))
        }
        Method::DeleteTaskPushNotificationConfig => Ok(Value::Object(Obj::new())),
        Method::GetExtendedAgentCard => Ok(super::card::to_v1(v)),
        Method::ListTasks => Ok(v),
    }
}

/// A 0.3 JSON-RPC call's params (a2a.json) as 1.0's request message of `method`.
pub fn params_in(method: Method, mut p: Obj) -> In<Obj> {
    let s = Style::Json;
    let take = |p: &mut Obj, k: &str| some(p.remove(k));
    let mut out = Obj::new();
    match method {
        Method::SendMessage | Method::SendStreamingMessage => return send_in(s, p),
        Method::GetTask => {
            if let Some(id) = take(&mut p, "id") {
                out.insert("id".to_owned(), id);
            }
            if let Some(h) = take(&mut p, "historyLength").filter(|h| h.as_i64() != Some(0)) {
                out.insert("historyLength".to_owned(), h);
            }
        }
        Method::CancelTask => {
            for k in ["id", "metadata"] {
                if let Some(x) = take(&mut p, k) {
                    out.insert(k.to_owned(), x);
                }
            }
        }
        Method::SubscribeToTask => {
            if let Some(id) = take(&mut p, "id") {
                out.insert("id".to_owned(), id);
            }
        }
        Method::CreateTaskPushNotificationConfig => {
            let Value::Object(mut c) = task_push_in(s, Value::Object(p))? else {
                return Ok(out);
            };
            // 0.3's SDK servers name a config with no id by its task's id.
            if !c.contains_key("id") {
                if let Some(t) = c.get("taskId").cloned() {
                    c.insert("id".to_owned(), t);
                }
            }
            return Ok(c);
        }
        Method::GetTaskPushNotificationConfig | Method::DeleteTaskPushNotificationConfig => {
            let task = take(&mut p, "id");
            let id = take(&mut p, "pushNotificationConfigId").or_else(|| task.clone());
            if let Some(t) = task {
                out.insert("taskId".to_owned(), t);
            }
            if let Some(id) = id {
                out.insert("id".to_owned(), id);
            }
        }
        Method::ListTaskPushNotificationConfigs => {
            if let Some(t) = take(&mut p, "id") {
                out.insert("taskId".to_owned(), t);
            }
        }
        Method::GetExtendedAgentCard => {}
        Method::ListTasks => return Ok(p),
    }
    Ok(out)
}

/// 1.0's request message of `method` as a 0.3 JSON-RPC call's params (a2a.json).
pub fn params_out(method: Method, p: &Obj) -> Value {
    let s = Style::Json;
    let mut out = Obj::new();
    let copy = |out: &mut Obj, from: &str, to: &str| {
        if let Some(x) = p.get(from) {
            out.insert(to.to_owned(), x.clone());
        }
    };
    match method {
        Method::SendMessage | Method::SendStreamingMessage => return send_out(s, p),
        Method::GetTask => {
            copy(&mut out, "id", "id");
            copy(&mut out, "historyLength", "historyLength");
        }
        Method::CancelTask => {
            copy(&mut out, "id", "id");
            copy(&mut out, "metadata", "metadata");
        }
        Method::SubscribeToTask => copy(&mut out, "id", "id"),
        Method::CreateTaskPushNotificationConfig => {
            return task_push_out(s, &Value::Object(p.clone()))
        }
        Method::GetTaskPushNotificationConfig | Method::DeleteTaskPushNotificationConfig => {
            copy(&mut out, "taskId", "id");
            copy(&mut out, "id", "pushNotificationConfigId");
        }
        Method::ListTaskPushNotificationConfigs => copy(&mut out, "taskId", "id"),
        Method::GetExtendedAgentCard | Method::ListTasks => {}
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Obj {
        v.as_object().cloned().expect("an object")
    }

    #[test]
    fn a_json_rpc_send_reads_as_1_0_and_back() {
        let p = obj(json!({
            "message": {"kind": "message", "messageId": "m1", "role": "user", "contextId": null,
                "parts": [
                    {"kind": "text", "text": "hi", "metadata": {"a": 1}},
                    {"kind": "file", "file": {"uri": "https://x/f.png", "mimeType": "image/png", "name": "f.png"}},
                    {"kind": "file", "file": {"bytes": "aGk="}},
                    {"kind": "data", "data": {"k": [1, 2]}}
                ]},
            "configuration": {"blocking": false, "historyLength": 0, "acceptedOutputModes": ["text/plain"],
                "pushNotificationConfig": {"url": "https://h/p", "token": "t",
                    "authentication": {"schemes": ["Bearer"], "credentials": "c"}}},
            "metadata": {"m": true}
        }));
        let v1 = send_in(Style::Json, p).expect("reads");
        assert_eq!(
            Value::Object(v1.clone()),
            json!({
                "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [
                    {"text": "hi", "metadata": {"a": 1}},
                    {"url": "https://x/f.png", "mediaType": "image/png", "filename": "f.png"},
                    {"raw": "aGk="},
                    {"data": {"k": [1, 2]}}
                ]},
                "configuration": {"returnImmediately": true, "acceptedOutputModes": ["text/plain"],
                    "taskPushNotificationConfig": {"url": "https://h/p", "token": "t",
                        "authentication": {"scheme": "Bearer", "credentials": "c"}}},
                "metadata": {"m": true}
            })
        );
        let back = send_out(Style::Json, &v1);
        assert_eq!(back["message"]["role"], "user");
        assert_eq!(back["message"]["kind"], "message");
        assert_eq!(back["message"]["parts"][1]["file"]["name"], "f.png");
        assert_eq!(
            back["message"]["parts"][3],
            json!({"kind": "data", "data": {"k": [1, 2]}})
        );
        assert_eq!(back["configuration"]["blocking"], false);
        assert_eq!(
            back["configuration"]["pushNotificationConfig"]["authentication"]["schemes"],
            json!(["Bearer"])
        );
    }

    #[test]
    fn blocking_left_out_blocks_in_json_and_not_in_a_proto_configuration() {
        let send = |s, config: Value| {
            let mut p = obj(
                json!({"message": {"messageId": "m", "role": "ROLE_USER", "content": [], "parts": []}}),
            );
            if !config.is_null() {
                p.insert("configuration".to_owned(), config);
            }
            send_in(s, p).expect("reads")
        };
        let json_absent = send(Style::Json, json!({"acceptedOutputModes": []}));
        assert_eq!(json_absent["configuration"].get("returnImmediately"), None);
        let proto_absent = send(Style::Proto, json!({"acceptedOutputModes": []}));
        assert_eq!(proto_absent["configuration"]["returnImmediately"], true);
        let proto_true = send(Style::Proto, json!({"blocking": true}));
        assert_eq!(proto_true["configuration"]["returnImmediately"], false);
        assert_eq!(send(Style::Proto, Value::Null).get("configuration"), None);
    }

    #[test]
    fn a_bad_part_or_role_names_its_field() {
        let p = obj(
            json!({"message": {"messageId": "m", "role": "user", "parts": [
            {"kind": "text", "text": "ok"}, {"kind": "video"}]}}),
        );
        let e = send_in(Style::Json, p).expect_err("refused");
        assert_eq!(e.instance_path, "/message/parts/1/kind");
        let p = obj(json!({"message": {"messageId": "m", "role": "ROLE_ROBOT", "parts": []}}));
        assert_eq!(
            send_in(Style::Json, p).expect_err("refused").instance_path,
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

    #[test]
    fn push_configs_map_both_ways_in_both_spellings() {
        let v1 = json!({"taskId": "t", "id": "c1", "url": "https://h/p", "token": "tok",
            "authentication": {"scheme": "Bearer", "credentials": "x"}});
        let j = task_push_out(Style::Json, &v1);
        assert_eq!(
            j,
            json!({"taskId": "t", "pushNotificationConfig": {"id": "c1", "url": "https://h/p", "token": "tok",
                "authentication": {"schemes": ["Bearer"], "credentials": "x"}}})
        );
        assert_eq!(task_push_in(Style::Json, j).expect("reads"), v1);
        let p = task_push_out(Style::Proto, &v1);
        assert_eq!(p["name"], "tasks/t/pushNotificationConfigs/c1");
        assert_eq!(task_push_in(Style::Proto, p).expect("reads"), v1);
        // A 0.3 set without an id is named by its task, as 0.3's SDK servers name it.
        let set = params_in(
            Method::CreateTaskPushNotificationConfig,
            obj(json!({"taskId": "t", "pushNotificationConfig": {"url": "https://h/p"}})),
        )
        .expect("reads");
        assert_eq!(
            Value::Object(set),
            json!({"taskId": "t", "id": "t", "url": "https://h/p"})
        );
        let get = params_in(
            Method::GetTaskPushNotificationConfig,
            obj(json!({"id": "t"})),
        )
        .expect("reads");
        assert_eq!(Value::Object(get), json!({"taskId": "t", "id": "t"}));
        let list = answer_out(
            Style::Json,
            Method::ListTaskPushNotificationConfigs,
            json!({"configs": [v1.clone()]}),
        );
        assert_eq!(list[0]["pushNotificationConfig"]["id"], "c1");
        assert_eq!(
            answer_in(Style::Json, Method::ListTaskPushNotificationConfigs, list).expect("reads"),
            json!({"configs": [v1]})
        );
    }

    #[test]
    fn params_out_are_0_3_params() {
        let get = params_out(
            Method::GetTask,
            &obj(json!({"id": "t", "historyLength": 2, "tenant": "x"})),
        );
        assert_eq!(get, json!({"id": "t", "historyLength": 2}));
        let del = params_out(
            Method::DeleteTaskPushNotificationConfig,
            &obj(json!({"taskId": "t", "id": "c"})),
        );
        assert_eq!(del, json!({"id": "t", "pushNotificationConfigId": "c"}));
        let send = params_out(
            Method::SendMessage,
            &obj(
                json!({"tenant": "x", "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a"}]}}),
            ),
        );
        assert_eq!(send["configuration"]["blocking"], true);
        assert_eq!(send.get("tenant"), None);
        assert_eq!(
            send["message"]["parts"][0],
            json!({"kind": "text", "text": "a"})
        );
    }
}
