//! A faithful, scriptable A2A 1.0 agent served over real HTTP on loopback.
//!
//! Why it exists: the gateway needs something real to stand in front of. The same agent serves
//! three audiences: `a2a-gateway demo` (two agents with [`Progress`] so a developer can curl a
//! working system), integration tests (which script it to misbehave with [`Reply`] and read back
//! what it saw with [`Recorded`]), and load runs (behind nginx and behind the gateway), so its hot
//! path is a plain hyper service with short lock sections and no logging.
//!
//! Layout: this file is the public handle; `server` routes and answers requests, `state` keeps the
//! tasks, artifacts and open streams, `shared` holds what the handle and the server both touch,
//! `body` the response bodies, `progress` the demo's auto-advance, `notify` the push
//! notifications the spec requires when the card has a `notification_config` (and the official
//! agent's pushes). The official A2A agent: `official` its card and tasks, `a2a` its calls,
//! `a2a_bindings` its two bindings in 1.0 or 0.3 (`v0_3`), `a2a_stream` its streams.

#![warn(missing_docs)]

mod a2a;
mod a2a_bindings;
mod a2a_grpc;
mod a2a_stream;
mod body;
mod notify;
mod official;
mod progress;
mod server;
mod shared;
mod state;
#[cfg(test)]
mod tests;
mod v0_3;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};

use shared::{lock, Shared};

pub use official::{a2a_card, a2a_card_v0_3, CARD_PATH as A2A_CARD_PATH};

/// Which protocol the agent speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    /// Clawpedia A2A 1.0: the REST task protocol with input and output schemas on the card.
    #[default]
    Clawpedia,
    /// The official A2A 1.0 protocol (a2aproject): JSON-RPC at `/a2a/jsonrpc` and HTTP+JSON
    /// under `/a2a/rest`, the card at `/.well-known/agent-card.json` (see [`a2a_card`]).
    A2a,
    /// The official protocol at A2A 0.3: the same routes and tasks, a 0.3 card (see
    /// [`a2a_card_v0_3`]), 0.3's JSON-RPC methods and shapes, and 0.3's HTTP+JSON routes under
    /// `/a2a/rest/v1/`.
    A2aV0_3,
}

/// How to start a [`SampleAgent`]. Every field has a default so callers set only what their
/// scenario is about.
#[derive(Clone, Debug)]
pub struct AgentOptions {
    /// Where to listen; the default `127.0.0.1:0` lets parallel tests each get a free port.
    pub listen: SocketAddr,
    /// The protocol spoken; [`AgentOptions::a2a`] sets the official one with its card.
    pub protocol: Protocol,
    /// The AgentCard served at `card_path`; [`card_for`] builds a valid one. Tests may put an
    /// invalid card here on purpose: the agent serves it as given.
    pub card: Value,
    /// Path of the card, default `/agent-card.json` (the spec's example well-known endpoint).
    pub card_path: String,
    /// `Cache-Control: max-age=N` on the card when `Some`, so card-cache freshness can be tested.
    pub card_max_age: Option<u64>,
    /// `None`: tasks stay as created or scripted (tests drive them). `Some`: tasks advance on
    /// their own to COMPLETED with artifacts and stream events (the demo).
    pub progress: Option<Progress>,
    /// Bound on the in-memory task map; the oldest task (and its artifacts and streams) is
    /// evicted first, so load runs cannot grow the agent without limit. Zero is treated as one.
    pub max_tasks: usize,
    /// Interval of quiet after which an open stream gets an `event: ping` (the spec asks for
    /// 15–20 s; tests shorten it). `Duration::ZERO` disables pings.
    pub ping_every: Duration,
    /// How many requests [`SampleAgent::requests`] keeps (a ring, default 10 000). Zero turns the
    /// ring off, which load runs want: recording clones every request's headers and body. The
    /// per-route counts of [`SampleAgent::request_count`] are kept either way.
    pub record_capacity: usize,
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            protocol: Protocol::Clawpedia,
            card: card_for("Sample Agent", None),
            card_path: "/agent-card.json".to_string(),
            card_max_age: None,
            progress: None,
            max_tasks: 100_000,
            ping_every: Duration::from_secs(15),
            record_capacity: 10_000,
        }
    }
}

impl AgentOptions {
    /// An official A2A 1.0 agent: its card (built once the port is known, [`a2a_card`] with
    /// this name unless `card` is set to another) at `/.well-known/agent-card.json`.
    pub fn a2a(name: &str) -> AgentOptions {
        AgentOptions {
            protocol: Protocol::A2a,
            card: json!({ "name": name }),
            card_path: A2A_CARD_PATH.to_string(),
            ..AgentOptions::default()
        }
    }

    /// The same agent speaking A2A 0.3 (its card [`a2a_card_v0_3`]).
    pub fn a2a_v0_3(name: &str) -> AgentOptions {
        AgentOptions {
            protocol: Protocol::A2aV0_3,
            ..AgentOptions::a2a(name)
        }
    }
}

/// Auto-advance timings for the demo: SUBMITTED → WORKING after `to_working`, then → COMPLETED
/// after `to_completed` more, with an `output`, a `text` artifact, a `file` artifact (a small
/// Python script) and `log` / `artifact.update` events on the task's stream along the way.
/// A task moved elsewhere meanwhile (cancelled, scripted) is left alone.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Delay from creation to WORKING.
    pub to_working: Duration,
    /// Delay from WORKING to COMPLETED.
    pub to_completed: Duration,
}

impl Default for Progress {
    /// Timings for the demo: slow enough to watch a task move (and open its stream) with curl,
    /// fast enough not to bore.
    fn default() -> Self {
        Progress {
            to_working: Duration::from_secs(1),
            to_completed: Duration::from_secs(3),
        }
    }
}

/// The routes the agent knows, used to script replies and count requests per endpoint.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Route {
    /// `GET` (or `HEAD`) of the card path.
    Card,
    /// `POST /tasks`.
    CreateTask,
    /// `GET /tasks/{id}`.
    GetTask,
    /// `POST /tasks/{id}/cancel`.
    CancelTask,
    /// `GET /tasks/{id}/artifacts`.
    ListArtifacts,
    /// `GET /artifacts/{id}/content`.
    ArtifactContent,
    /// `GET /tasks/{id}/stream`.
    Stream,
    /// `GET /downloads/{id}`, where redirected file artifacts are served.
    Download,
    /// `POST /a2a/jsonrpc`: the official protocol's JSON-RPC binding (an A2A agent's).
    A2aJsonRpc,
    /// Anything under `/a2a/rest/`: the official protocol's HTTP+JSON binding.
    A2aRest,
    /// `POST /lf.a2a.v1.A2AService/{Method}`: the official protocol's gRPC binding (h2c).
    A2aGrpc,
    /// Anything else (answered 404 by default; tests use it e.g. as a webhook sink).
    Other,
}

impl Route {
    /// Number of routes, for the per-route counters.
    pub(crate) const COUNT: usize = 12;
}

/// A scripted answer for a route (see [`SampleAgent::script`]).
#[derive(Clone, Debug)]
pub enum Reply {
    /// Normal, correct behaviour.
    Default,
    /// This status and JSON body (a status outside 100..=999 becomes 500).
    Json(u16, Value),
    /// Exactly these bytes with this status and Content-Type (torture tests).
    Raw {
        /// HTTP status.
        status: u16,
        /// Content-Type header value (left out if it is not a valid header value).
        content_type: String,
        /// The body, sent as is.
        body: Bytes,
    },
    /// Wait, then reply with the inner reply (slow agents, gateway timeouts).
    Delay(Duration, Box<Reply>),
    /// Never answer; the request ends (connection dropped) when the agent shuts down.
    Hang,
    /// Drop the connection without a response (unreachable-agent failures). Over HTTP/2 the
    /// request's stream is reset instead, as hyper does for a failed service.
    Close,
}

/// A new artifact for [`SampleAgent::add_artifact`].
#[derive(Clone, Debug)]
pub enum NewArtifact {
    /// `type: text`; content served as text/plain.
    Text(String),
    /// `type: json`; `content` is the serialized JSON, served as application/json.
    Json(Value),
    /// `type: log`; served as text/plain.
    Log(String),
    /// `type: url`; `content` is the URL, served as text/plain.
    Url(String),
    /// `type: file`; the content endpoint answers 200 with `mime_type` and the body in 64 KiB
    /// frames (so a proxy's streaming can be observed).
    File {
        /// `metadata.filename`.
        filename: String,
        /// `metadata.mime_type` and the Content-Type of the download.
        mime_type: String,
        /// The file itself.
        body: Bytes,
    },
    /// `type: file`; the content endpoint answers 302 to `{base_url}/downloads/{id}`, which
    /// serves the body (the spec's other way to deliver files).
    Redirect {
        /// `metadata.filename`.
        filename: String,
        /// `metadata.mime_type` and the Content-Type of the download.
        mime_type: String,
        /// The file itself.
        body: Bytes,
    },
}

/// One request as the agent saw it, so tests can assert what the gateway forwarded.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// The route it matched.
    pub route: Route,
    /// HTTP method.
    pub method: String,
    /// Path without the query.
    pub path: String,
    /// Raw query string, if any.
    pub query: Option<String>,
    /// All request headers.
    pub headers: hyper::HeaderMap,
    /// The whole request body.
    pub body: Bytes,
}

/// The spec's example AgentCard, as the spec prints it ("Python Script Generator").
pub fn spec_example_card() -> Value {
    json!({
      "protocol_version": "1.0",
      "agent_id": "f47ac10b-58cc-4372-a567-0e02b2c3d479",
      "display_name": "Python Script Generator",
      "description": "Generates a Python script based on a given topic and saves it as an artifact.",
      "capabilities": ["code-generation", "file-io"],
      "input_schema": {
        "type": "object",
        "properties": {
          "topic": {"type": "string", "description": "The subject for the Python script."},
          "filename": {"type": "string", "pattern": "^[a-zA-Z0-9_]+\\.py$"}
        },
        "required": ["topic", "filename"]
      },
      "notification_config": {
        "endpoint_url": "https://orchestrator.example.com/webhooks/agent-updates",
        "auth_header": "Authorization: Bearer dG9rZW4tZm9yLXdlYmhvb2tz"
      }
    })
}

/// Builds a card that passes the spec's AgentCard schema: the spec's example card with a fresh
/// uuid `agent_id`, `display_name`, an `output_schema` matching what [`Progress`] produces, and
/// `notification_config {endpoint_url, auth_header}` only when given (an empty `auth_header` is
/// left out). `auth_header` is a whole header line, as in the spec's example
/// (`"Authorization: Bearer ..."`).
pub fn card_for(display_name: &str, notification: Option<(&str, &str)>) -> Value {
    let mut card = spec_example_card();
    card["agent_id"] = Value::String(uuid::Uuid::new_v4().to_string());
    card["display_name"] = Value::String(display_name.to_string());
    card["output_schema"] = json!({
        "type": "object",
        "properties": {
            "summary": {"type": "string"},
            "filename": {"type": "string"},
            "lines": {"type": "integer", "minimum": 0}
        },
        "required": ["summary", "filename"]
    });
    if let Some(obj) = card.as_object_mut() {
        obj.remove("notification_config");
    }
    if let (Some((url, auth)), Some(obj)) = (notification, card.as_object_mut()) {
        let mut cfg = json!({ "endpoint_url": url });
        if !auth.is_empty() {
            cfg["auth_header"] = Value::String(auth.to_string());
        }
        obj.insert("notification_config".to_string(), cfg);
    }
    card
}

/// Handle on a running agent. The server runs on tokio tasks; dropping the handle or calling
/// [`SampleAgent::shutdown`] stops accepting, drops live connections (ending hung requests and
/// open streams) and stops auto-progress.
pub struct SampleAgent {
    shared: Arc<Shared>,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl SampleAgent {
    /// Binds `opts.listen` and starts serving. Fails only if the address cannot be bound.
    pub async fn start(opts: AgentOptions) -> std::io::Result<SampleAgent> {
        let listener = tokio::net::TcpListener::bind(opts.listen).await?;
        let addr = listener.local_addr()?;
        let (shared, notify_rx) = Shared::new(opts, addr);
        let shared = Arc::new(shared);
        notify::spawn_worker(notify_rx, shared.notify_stats.clone(), shared.stop_signal());
        let server = tokio::spawn(server::accept_loop(listener, shared.clone()));
        Ok(SampleAgent {
            shared,
            server: Some(server),
        })
    }

    /// The bound address (with the real port when started on port 0).
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// `http://127.0.0.1:PORT` (a wildcard listen address is reported as loopback so the URL is
    /// usable); also the base of artifact download URLs.
    pub fn base_url(&self) -> String {
        self.shared.base_url.clone()
    }

    /// `agent_id` of the current card ("" if the card has none), which tasks carry.
    pub fn agent_id(&self) -> String {
        self.shared.card().agent_id.clone()
    }

    /// Stops the agent and waits until the listener and every connection are gone.
    pub async fn shutdown(mut self) {
        self.shared.stop();
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }

    /// The card currently served, as JSON (what a gateway should have cached).
    pub fn card(&self) -> Value {
        serde_json::from_slice(&self.shared.card().body).unwrap_or(Value::Null)
    }

    /// Replaces the card; it gets a new strong ETag so caches must notice.
    pub fn set_card(&self, card: Value) {
        self.shared.set_card(card);
    }

    /// Changes the card's `Cache-Control: max-age` (the ETag stays: the card did not change).
    pub fn set_card_max_age(&self, secs: Option<u64>) {
        self.shared.set_card_max_age(secs);
    }

    /// Every request to the card route so far, whether answered 200, 304 or scripted.
    pub fn card_fetches(&self) -> usize {
        self.request_count(Route::Card)
    }

    /// How many card requests were answered 304 through `If-None-Match`.
    pub fn card_not_modified(&self) -> usize {
        self.shared.card_not_modified.load(Ordering::Relaxed)
    }

    /// The task as the agent would serve it, if known (not evicted).
    pub fn task(&self, task_id: &str) -> Option<Value> {
        lock(&self.shared.store).get(task_id)
    }

    /// Creates a task as `POST /tasks` with this `input` would (no auto-advance, no request
    /// recorded) and returns its id: how load runs set up a task to read.
    pub fn create_task(&self, input: Value) -> String {
        let agent_id = self.shared.card().agent_id.clone();
        lock(&self.shared.store).create(&agent_id, input).0
    }

    /// Ids of the tasks held, oldest first.
    pub fn task_ids(&self) -> Vec<String> {
        lock(&self.shared.store).task_ids()
    }

    /// Forces a status (no lifecycle check, so tests can make the agent break the rules), merges
    /// the fields of `extra` (if an object: `output`, `error`, `prompt`, even `updated_at`) into
    /// the task, bumps `updated_at`, sends a push notification if the card asks for them, and
    /// returns the new task. Nothing is sent on the task's streams: use [`Self::push_event`].
    pub fn set_status(&self, task_id: &str, status: &str, extra: Value) -> Option<Value> {
        self.shared.set_status(task_id, status, extra)
    }

    /// Adds an artifact to a task and returns its id. Nothing is announced on the streams (use
    /// [`Self::push_event`]). If the task is unknown or evicted nothing is stored, and the
    /// returned id answers 404.
    pub fn add_artifact(&self, task_id: &str, artifact: NewArtifact) -> String {
        self.shared.add_artifact(task_id, artifact, None)
    }

    /// Sends `event: {event}` / `data: {data}` to every open stream of the task (multi-line data
    /// becomes several `data:` lines; CR/LF are removed from the event name).
    pub fn push_event(&self, task_id: &str, event: &str, data: &str) {
        self.shared.push_raw(task_id, body::sse_event(event, data));
    }

    /// Sends these bytes unchanged to every open stream of the task (torture streams).
    pub fn push_raw(&self, task_id: &str, raw: Bytes) {
        self.shared.push_raw(task_id, raw);
    }

    /// Ends every open stream of the task once what was already pushed has been sent.
    pub fn close_streams(&self, task_id: &str) {
        lock(&self.shared.store).close_streams(task_id);
    }

    /// Streams of the task open right now (a client that went away is no longer counted).
    pub fn stream_connections(&self, task_id: &str) -> usize {
        lock(&self.shared.store).stream_connections(task_id)
    }

    /// Streams of the task ever opened, to check "one upstream stream for N subscribers".
    pub fn streams_opened(&self, task_id: &str) -> usize {
        lock(&self.shared.store).streams_opened(task_id)
    }

    /// Every request to `route` gets `reply` until [`Self::clear_scripts`].
    pub fn script(&self, route: Route, reply: Reply) {
        self.shared.scripts.set(route, reply);
    }

    /// The next request to `route` only gets `reply`; several queue up (FIFO) and are used
    /// before the persistent script.
    pub fn script_once(&self, route: Route, reply: Reply) {
        self.shared.scripts.push_once(route, reply);
    }

    /// Back to correct behaviour on every route.
    pub fn clear_scripts(&self) {
        self.shared.scripts.clear();
    }

    /// The last requests received (up to `record_capacity`), oldest first.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.recorded()
    }

    /// Total requests to `route` since start (never dropped, whatever `record_capacity` is).
    pub fn request_count(&self, route: Route) -> usize {
        self.shared.counts[route as usize].load(Ordering::Relaxed)
    }

    /// Push notifications delivered with a 2xx answer.
    pub fn notifications_sent(&self) -> usize {
        self.shared.notify_stats.sent.load(Ordering::Relaxed)
    }

    /// Push notifications that failed (bad endpoint, error, timeout, non-2xx, or dropped because
    /// the bounded delivery queue was full). They are not retried.
    pub fn notifications_failed(&self) -> usize {
        self.shared.notify_stats.failed.load(Ordering::Relaxed)
    }
}

impl Drop for SampleAgent {
    fn drop(&mut self) {
        self.shared.stop();
    }
}
