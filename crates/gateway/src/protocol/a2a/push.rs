//! A2A push configs as the gateway keeps them (§3.1.7–§3.1.10, §4.3), with no I/O.
//!
//! A client's `TaskPushNotificationConfig` never reaches the agent: the gateway keeps it in the
//! ledger beside its task, and delivers every accepted change of the task to it through the
//! durable webhook queue. What is stored is [`PushConfig`], secrets included (the worker needs
//! them); what is served back is [`PushConfig::served`], which never carries the
//! `authentication.credentials`. The webhook queue knows a config only by its lane's subscriber
//! name ([`lane`]), so neither a lane entry nor a dead letter holds a secret.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{A2aError, ErrorKind};

/// The lane subscriber names of push configs start with this: a configured subscriber's name
/// cannot (names are `[A-Za-z0-9._-]`), so the two never meet.
pub const LANE_PREFIX: &str = "~push:";

/// The `subscriber` label and dead-letter name of every A2A push delivery: one series for all
/// configs, never one per config.
pub const SUBSCRIBER: &str = "a2a_push";

/// Longest config id kept (a UUID is 36).
pub const MAX_ID: usize = 128;
/// Longest `url`.
pub const MAX_URL: usize = 2048;
/// Longest `token`, `authentication.scheme` or `authentication.credentials`.
pub const MAX_SECRET: usize = 4096;

/// One push config of a task, as stored (secrets included; its `Debug` shows neither).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushConfig {
    /// The config's id, unique within its task.
    pub id: String,
    /// Where each change is POSTed (checked by the webhook guard before it is stored).
    pub url: String,
    /// Sent as `X-A2A-Notification-Token`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// `authentication.scheme`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    /// `authentication.credentials`: with `scheme`, sent as `Authorization: {scheme}
    /// {credentials}`; never served back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
    /// The A2A version of the client that made it, when not 1.0 (`0.3`): what its deliveries
    /// are written in (0.3: the bare Task of a2a.json, as 0.3's SDK senders post it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl std::fmt::Debug for PushConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushConfig")
            .field("id", &self.id)
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("scheme", &self.scheme)
            .field(
                "credentials",
                &self.credentials.as_ref().map(|_| "<redacted>"),
            )
            .field("version", &self.version)
            .finish()
    }
}

impl PushConfig {
    /// The stored form.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// A stored config, or `None` for bytes that are not one.
    pub fn decode(bytes: &[u8]) -> Option<PushConfig> {
        serde_json::from_slice(bytes).ok()
    }

    /// The `Authorization` header value, when the config has a scheme and credentials (a scheme
    /// alone sends none, as a2a-sdk's sender does).
    pub fn authorization(&self) -> Option<String> {
        match (&self.scheme, &self.credentials) {
            (Some(s), Some(c)) if !s.is_empty() && !c.is_empty() => Some(format!("{s} {c}")),
            _ => None,
        }
    }

    /// The TaskPushNotificationConfig served to the task's owner: its `authentication` names
    /// the scheme only (credentials are write-only: the gateway never serves a secret back).
    pub fn served(&self, task_id: &str) -> Value {
        let mut o = Map::new();
        o.insert("id".into(), Value::from(self.id.as_str()));
        o.insert("taskId".into(), Value::from(task_id));
        o.insert("url".into(), Value::from(self.url.as_str()));
        if let Some(t) = &self.token {
            o.insert("token".into(), Value::from(t.as_str()));
        }
        if let Some(s) = &self.scheme {
            let mut a = Map::new();
            a.insert("scheme".into(), Value::from(s.as_str()));
            o.insert("authentication".into(), Value::Object(a));
        }
        Value::Object(o)
    }
}

/// A config's id when the client gave none (the task's, as a2a-sdk's servers do), made fit for
/// a lane and the store: at most [`MAX_ID`] printable characters, never starting with `~`.
pub fn default_id(task_id: &str) -> String {
    let mut id: String = task_id
        .chars()
        .map(|c| if c.is_ascii_graphic() { c } else { '_' })
        .take(MAX_ID - 1)
        .collect();
    if id.is_empty() || id.starts_with('~') {
        id.insert(0, 't');
    }
    id
}

/// The lane subscriber name of config `id`.
pub fn lane(id: &str) -> String {
    format!("{LANE_PREFIX}{id}")
}

/// The config id of a lane subscriber name, if it is a push config's.
pub fn lane_config(subscriber: &str) -> Option<&str> {
    subscriber.strip_prefix(LANE_PREFIX)
}

fn invalid(field: &str, why: &str) -> A2aError {
    A2aError::new(ErrorKind::InvalidParams, format!("{field}: {why}"))
}

/// Printable ASCII without spaces: what a header value, a lane key and a log field can carry
/// as they are.
fn plain(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_graphic())
}

/// A header value may hold spaces, never control characters.
fn header_safe(s: &str) -> bool {
    s.bytes().all(|b| b == b' ' || b.is_ascii_graphic())
}

fn opt_str<'a>(o: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
    o.get(k).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// A client's TaskPushNotificationConfig (a Create's params, or SendMessage's inline config),
/// read into what the gateway stores. Its shape was checked with the request
/// (`check::push_config`); this reads the values the gateway relies on: an id fit for a lane
/// (`new_id` when none), an absolute http(s) URL, and secrets a header can carry.
pub fn read(
    o: &Map<String, Value>,
    new_id: impl FnOnce() -> String,
) -> Result<PushConfig, A2aError> {
    let id = match opt_str(o, "id") {
        Some(id) if id.len() > MAX_ID => return Err(invalid("id", "at most 128 characters")),
        Some(id) if !plain(id) => {
            return Err(invalid("id", "printable ASCII without spaces"));
        }
        // `~` starts the store's own fields (the agent's push token): never a client's.
        Some(id) if id.starts_with('~') => return Err(invalid("id", "must not start with ~")),
        Some(id) => id.to_owned(),
        // Empty: named later (an inline config takes its task's id once the answer names it).
        None => Some(new_id())
            .filter(|n| !n.is_empty())
            .map_or_else(String::new, |n| default_id(&n)),
    };
    let url = opt_str(o, "url").ok_or_else(|| invalid("url", "required"))?;
    if url.len() > MAX_URL || !plain(url) {
        return Err(invalid(
            "url",
            "an absolute http(s) URL of at most 2048 characters",
        ));
    }
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("https://") || lower.starts_with("http://")) {
        return Err(invalid("url", "an absolute http(s) URL"));
    }
    let token = opt_str(o, "token").map(str::to_owned);
    if token
        .as_deref()
        .is_some_and(|t| t.len() > MAX_SECRET || !header_safe(t))
    {
        return Err(invalid(
            "token",
            "at most 4096 characters a header can carry",
        ));
    }
    let auth = o.get("authentication").and_then(Value::as_object);
    let scheme = auth.and_then(|a| opt_str(a, "scheme")).map(str::to_owned);
    if scheme.as_deref().is_some_and(|s| s.len() > 64 || !plain(s)) {
        return Err(invalid(
            "authentication.scheme",
            "an HTTP authentication scheme",
        ));
    }
    let credentials = auth
        .and_then(|a| opt_str(a, "credentials"))
        .map(str::to_owned);
    if credentials
        .as_deref()
        .is_some_and(|c| c.len() > MAX_SECRET || !header_safe(c))
    {
        return Err(invalid(
            "authentication.credentials",
            "at most 4096 characters a header can carry",
        ));
    }
    Ok(PushConfig {
        id,
        url: url.to_owned(),
        token,
        scheme,
        credentials,
        version: None,
    })
}

/// The body of a push delivery of a recorded Task: the StreamResponse `{"task": ...}`, the
/// Task's bytes as the ledger holds them.
pub fn task_body(task: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(task.len() + 9);
    out.extend_from_slice(b"{\"task\":");
    out.extend_from_slice(task);
    out.push(b'}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(o) => o,
            _ => panic!("object"),
        }
    }

    #[test]
    fn a_config_is_read_stored_and_served_without_its_credentials() {
        let c = read(
            &obj(json!({"url": "https://h.example/cb", "token": "tok",
                "authentication": {"scheme": "Bearer", "credentials": "s3cret"}})),
            || "gen".into(),
        )
        .expect("valid");
        assert_eq!(c.id, "gen");
        assert_eq!(c.authorization().as_deref(), Some("Bearer s3cret"));
        assert_eq!(PushConfig::decode(&c.encode()), Some(c.clone()));
        let served = c.served("t-1");
        assert_eq!(
            served,
            json!({"id": "gen", "taskId": "t-1", "url": "https://h.example/cb", "token": "tok",
                "authentication": {"scheme": "Bearer"}})
        );
        assert!(!served.to_string().contains("s3cret"));
        // A scheme without credentials sends no Authorization.
        let bare = read(
            &obj(json!({"id": "a", "url": "http://h/", "authentication": {"scheme": "Basic"}})),
            || unreachable!(),
        )
        .expect("valid");
        assert_eq!((bare.id.as_str(), bare.authorization()), ("a", None));
    }

    #[test]
    fn what_a_lane_or_a_header_cannot_carry_is_refused() {
        let bad = [
            json!({"url": "ftp://h/x"}),
            json!({"url": "/relative"}),
            json!({"url": "http://h/a b"}),
            json!({"id": "a b", "url": "http://h/"}),
            json!({"id": "x".repeat(129), "url": "http://h/"}),
            json!({"id": "~token", "url": "http://h/"}),
            json!({"url": "http://h/", "token": "a\r\nX-Evil: 1"}),
            json!({"url": "http://h/", "authentication": {"scheme": "Bea rer", "credentials": "c"}}),
            json!({"url": "http://h/", "authentication": {"scheme": "B", "credentials": "c\n"}}),
            json!({}),
        ];
        for b in bad {
            let e = read(&obj(b.clone()), || "g".into()).expect_err(&b.to_string());
            assert_eq!(e.kind, ErrorKind::InvalidParams, "{b}");
        }
    }

    #[test]
    fn lanes_name_their_config() {
        assert_eq!(lane("c-1"), "~push:c-1");
        assert_eq!(default_id("~token"), "t~token");
        assert_eq!(default_id("a b"), "a_b");
        assert_eq!(default_id(&"x".repeat(300)).len(), MAX_ID - 1);
        assert_eq!(lane_config(&lane("c-1")), Some("c-1"));
        assert_eq!(lane_config("ops"), None);
        assert_eq!(
            task_body(br#"{"id":"t"}"#),
            br#"{"task":{"id":"t"}}"#.to_vec()
        );
    }
}
