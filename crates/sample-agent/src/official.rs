//! What the official A2A agent holds (`AgentOptions::a2a`): its card, naming its three
//! bindings' paths, and its tasks, bounded. The protocol's routes are in `a2a`.

use std::collections::{HashMap, VecDeque};

use serde_json::{json, Value};

/// Where the JSON-RPC binding is served.
pub(crate) const JSONRPC_PATH: &str = "/a2a/jsonrpc";
/// Where the HTTP+JSON binding's routes are served (`{REST_BASE}/message:send`...).
pub(crate) const REST_BASE: &str = "/a2a/rest";
/// The card path of the official protocol.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";

/// A valid A2A 1.0 AgentCard for an agent at `base_url`: its three bindings (gRPC on the same
/// listener, h2c), streaming, push.
pub fn a2a_card(name: &str, base_url: &str) -> Value {
    json!({
        "name": name,
        "description": "A sample official A2A 1.0 agent: echoes a message, asks for input when told to, fails and rejects on request.",
        "version": "1.0.0",
        "supportedInterfaces": [
            {"url": format!("{base_url}{JSONRPC_PATH}"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": format!("{base_url}{REST_BASE}"), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": base_url, "protocolBinding": "GRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {"streaming": true, "pushNotifications": true},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [skill()]
    })
}

/// A valid A2A 0.3 AgentCard (a2a.json's: `url`, `preferredTransport`, `additionalInterfaces`,
/// `protocolVersion`, no `supportedInterfaces`) for the agent at `base_url` speaking 0.3: its
/// JSON-RPC at the same path, its HTTP+JSON routes under `{REST_BASE}/v1/`.
pub fn a2a_card_v0_3(name: &str, base_url: &str) -> Value {
    json!({
        "name": name,
        "description": "A sample official A2A agent speaking 0.3: echoes a message, asks for input when told to, fails and rejects on request.",
        "version": "1.0.0",
        "protocolVersion": "0.3.0",
        "url": format!("{base_url}{JSONRPC_PATH}"),
        "preferredTransport": "JSONRPC",
        "additionalInterfaces": [
            {"url": format!("{base_url}{JSONRPC_PATH}"), "transport": "JSONRPC"},
            {"url": format!("{base_url}{REST_BASE}"), "transport": "HTTP+JSON"}
        ],
        "capabilities": {"streaming": true, "pushNotifications": true},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [skill()]
    })
}

fn skill() -> Value {
    json!({
        "id": "echo",
        "name": "Echo",
        "description": "Answers a message with its text; `need input` asks a question first, `slow` works until canceled.",
        "tags": ["echo", "multi-turn"],
        "examples": ["hello", "need input", "slow"]
    })
}

/// Push configs kept for one task at most (a client's Create past it is refused).
pub(crate) const MAX_PUSH_CONFIGS: usize = 10;

/// The agent's official A2A tasks, bounded (the oldest evicted first), and their push configs
/// (1.0's TaskPushNotificationConfig, at most [`MAX_PUSH_CONFIGS`] a task, gone with the task).
pub(crate) struct Tasks {
    pub(crate) map: HashMap<String, Value>,
    pub(crate) push: HashMap<String, Vec<Value>>,
    order: VecDeque<String>,
    max: usize,
}

impl Tasks {
    pub(crate) fn new(max: usize) -> Tasks {
        Tasks {
            map: HashMap::new(),
            push: HashMap::new(),
            order: VecDeque::new(),
            max: max.max(1),
        }
    }

    pub(crate) fn insert(&mut self, id: String, task: Value) {
        while self.map.len() >= self.max {
            match self.order.pop_front() {
                Some(old) => {
                    self.map.remove(&old);
                    self.push.remove(&old);
                }
                None => break,
            }
        }
        self.order.push_back(id.clone());
        self.map.insert(id, task);
    }
}
