//! An official A2A agent's file URLs: rewritten where its documents are read into the gateway,
//! and served by the gateway's file route.
//!
//! **The rewrite** ([`localize`]). A Part's `url` on the agent's own origin, in any spelling a
//! browser reads as it (`protocol::origin`), becomes `{base}/agents/{name}/files/{fileId}`,
//! where the ledger binds `fileId` to the task it was named in and to the URL as the agent
//! wrote it (`TaskLedger::bind_files`); a Part of a message outside any task is bound to the
//! client it was answered to. It happens once, as each document is read from the agent
//! (`to_agent::read_local`, `to_agent::read_answer`, `agent_stream::read_event`, and the agent's
//! pushes in `push_configs::ingest`), before anything judges, records or relays it: what the ledger
//! keeps, and so every later reader (GetTask of a final task, ListTasks, `GET /tasks`,
//! streams, push bodies, `/events`), is rewritten already. URLs elsewhere pass unchanged, and
//! so does free text (text and data parts, descriptions, metadata): it is the agent's content.
//!
//! `{base}` is `public_url`, else the gateway's own listener (`http[s]://{bound address}`),
//! never a request's `Host`: the URL is written into the ledger, where a client's `Host`
//! would reach every other reader of the task (a console with `all_tasks`, a push receiver),
//! who would follow it with their own key.
//!
//! **The route** ([`serve`]): `GET /agents/{name}/files/{fileId}`, for a caller that may read
//! the task (its owner, or a caller that sees every task; anyone else, and an unknown id, gets
//! the same 404). It fetches that one recorded URL from the agent's configured origin (its path
//! and query only: nothing else of the agent is reachable through it), with the agent's own
//! credential, and streams the answer back: no redirect followed (one to the agent's own
//! origin is 502 InvalidAgentResponseError), bounded like every streamed agent answer (the head within the agent's
//! timeout, the body cut after as long without a byte, one of its `max_in_flight` places held
//! meanwhile), the agent's error text withheld like any.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use hyper::header::{HeaderMap, LOCATION, SET_COOKIE};
use hyper::Method;
use serde_json::Value;

use crate::http::context::Ctx;
use crate::http::error::{ApiError, ApiResult, Code};
use crate::http::exchange::call::new_request;
use crate::http::exchange::pass_through;
use crate::http::request::Request;
use crate::http::route::valid_id;
use crate::ledger::FileScope;
use crate::protocol::a2a::Method as A2aMethod;
use crate::protocol::node::Node;
use crate::protocol::origin::Origin;
use crate::registry::Agent;
use crate::state::State;
use crate::upstream::upstream_headers;

/// Distinct file URLs bound per document: past it (a document built to fill the bindings), a
/// URL is still rewritten, to an id bound to nothing.
const MAX_FILES: usize = 256;
/// The longest URL bound (what a browser takes, and more): a longer one is rewritten to an id
/// bound to nothing.
const MAX_URL: usize = 8 * 1024;

/// What a document of the agent's is, where its Parts are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A Task (GetTask's, CancelTask's answer).
    Task,
    /// A SendMessageResponse or StreamResponse: `task`, `message`, `statusUpdate` or
    /// `artifactUpdate`.
    Response,
}

impl Shape {
    /// The shape of the agent's answer to `method`, if it carries Parts.
    pub fn of(method: A2aMethod) -> Option<Shape> {
        match method {
            A2aMethod::GetTask | A2aMethod::CancelTask => Some(Shape::Task),
            A2aMethod::SendMessage
            | A2aMethod::SendStreamingMessage
            | A2aMethod::SubscribeToTask => Some(Shape::Response),
            _ => None,
        }
    }
}

/// A JSON tree the rewrite walks: serde_json's, or one read in place.
pub trait Tree: Sized + Send {
    /// Member `key` of an object.
    fn member(&self, key: &str) -> Option<&Self>;
    /// Member `key` of an object, to change.
    fn member_mut(&mut self, key: &str) -> Option<&mut Self>;
    /// The elements of a list, to change (none for anything else).
    fn items_mut(&mut self) -> &mut [Self];
    /// The string, if it is one.
    fn text(&self) -> Option<&str>;
    /// Made the string `s`.
    fn set_text(&mut self, s: String);
}

impl Tree for Value {
    fn member(&self, key: &str) -> Option<&Self> {
        self.get(key)
    }
    fn member_mut(&mut self, key: &str) -> Option<&mut Self> {
        self.get_mut(key)
    }
    fn items_mut(&mut self) -> &mut [Self] {
        match self {
            Value::Array(items) => items,
            _ => &mut [],
        }
    }
    fn text(&self) -> Option<&str> {
        self.as_str()
    }
    fn set_text(&mut self, s: String) {
        *self = Value::String(s);
    }
}

impl Tree for Node<'_> {
    fn member(&self, key: &str) -> Option<&Self> {
        match self {
            Node::Object(m) => m.get_node(key),
            _ => None,
        }
    }
    fn member_mut(&mut self, key: &str) -> Option<&mut Self> {
        match self {
            Node::Object(m) => m.get_node_mut(key),
            _ => None,
        }
    }
    fn items_mut(&mut self) -> &mut [Self] {
        match self {
            Node::Array(items) => items,
            _ => &mut [],
        }
    }
    fn text(&self) -> Option<&str> {
        match self {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }
    fn set_text(&mut self, s: String) {
        *self = Node::Str(s.into());
    }
}

/// Each Part `url` string of `doc`, with the id of the task it belongs to, in document order.
fn walk<T: Tree>(doc: &mut T, shape: Shape, f: &mut dyn FnMut(Option<&str>, &mut T)) {
    match shape {
        Shape::Task => task(doc, f),
        Shape::Response => {
            if let Some(t) = doc.member_mut("task") {
                task(t, f);
            }
            if let Some(m) = doc.member_mut("message") {
                let id = owned(m.member("taskId"));
                parts(m, id.as_deref(), f);
            }
            if let Some(u) = doc.member_mut("statusUpdate") {
                let id = owned(u.member("taskId"));
                if let Some(m) = u.member_mut("status").and_then(|s| s.member_mut("message")) {
                    parts(m, id.as_deref(), f);
                }
            }
            if let Some(u) = doc.member_mut("artifactUpdate") {
                let id = owned(u.member("taskId"));
                if let Some(a) = u.member_mut("artifact") {
                    parts(a, id.as_deref(), f);
                }
            }
        }
    }
}

fn owned<T: Tree>(v: Option<&T>) -> Option<String> {
    v.and_then(Tree::text).map(str::to_owned)
}

fn task<T: Tree>(t: &mut T, f: &mut dyn FnMut(Option<&str>, &mut T)) {
    let id = owned(t.member("id"));
    let id = id.as_deref();
    if let Some(m) = t.member_mut("status").and_then(|s| s.member_mut("message")) {
        parts(m, id, f);
    }
    for key in ["history", "artifacts"] {
        if let Some(list) = t.member_mut(key) {
            for holder in list.items_mut() {
                parts(holder, id, f);
            }
        }
    }
}

/// The `url` of each Part of a Message or Artifact.
fn parts<T: Tree>(holder: &mut T, id: Option<&str>, f: &mut dyn FnMut(Option<&str>, &mut T)) {
    if let Some(list) = holder.member_mut("parts") {
        for part in list.items_mut() {
            if let Some(url) = part.member_mut("url").filter(|u| u.text().is_some()) {
                f(id, url);
            }
        }
    }
}

/// Whether the task `doc` is about is live, as far as the document says (a final state's
/// bindings expire with the task's retention).
fn live<T: Tree>(doc: &T, shape: Shape) -> bool {
    let status = match shape {
        Shape::Task => doc.member("status"),
        Shape::Response => doc
            .member("task")
            .or_else(|| doc.member("statusUpdate"))
            .and_then(|t| t.member("status")),
    };
    let state = status.and_then(|s| s.member("state")).and_then(Tree::text);
    !state
        .and_then(crate::protocol::a2a::TaskState::parse)
        .is_some_and(crate::protocol::a2a::TaskState::is_final)
}

/// The base of the URLs the rewrite writes (see the module doc).
pub fn base(state: &State) -> String {
    match state.config.public_url.as_deref() {
        Some(u) => u.trim_end_matches('/').to_owned(),
        None => {
            let scheme = if state.tls.is_some() { "https" } else { "http" };
            format!("{scheme}://{}", state.local_addr)
        }
    }
}

/// The agent's file URLs on its own origin in `doc` (of `shape`), rewritten to the gateway's
/// file route and bound in the ledger (see the module doc); `owner`: the client a message
/// outside any task is answered to. A ledger that cannot bind now still gets every such URL
/// rewritten (to an id bound to nothing): no address passes for want of a binding.
pub async fn localize<T: Tree>(
    state: &State,
    agent: &Agent,
    owner: Option<&str>,
    shape: Shape,
    doc: &mut T,
) {
    // Each replica names files on its own origin: every one of them is rewritten.
    let live = agent.replicas.live();
    let bases = std::iter::once(agent.cfg.url.as_str()).chain(
        live.iter()
            .map(|r| &*r.base)
            .filter(|b| *b != agent.cfg.url),
    );
    for origin in bases.filter_map(Origin::parse) {
        localize_at(state, agent, owner, shape, doc, &origin).await;
    }
}

/// [`localize`], for the file URLs on one origin of the agent's.
async fn localize_at<T: Tree>(
    state: &State,
    agent: &Agent,
    owner: Option<&str>,
    shape: Shape,
    doc: &mut T,
    origin: &Origin,
) {
    let Some(wanted) = wanted(origin, shape, doc) else {
        return;
    };
    let name = agent.cfg.name.as_str();
    let live = live(doc, shape);
    let mut ids: Ids = HashMap::new();
    for (task, urls) in wanted {
        let key = task
            .as_deref()
            .map(|t| crate::protocol::a2a::ledger_key(name, t));
        let scope = FileScope {
            agent: name,
            task: key.as_deref(),
            owner,
            live,
        };
        match state.ledger.bind_files(scope, &urls).await {
            Ok(bound) => ids.extend(
                urls.into_iter()
                    .zip(bound)
                    .map(|(u, id)| ((task.clone(), u), id)),
            ),
            Err(e) => {
                tracing::warn!(agent = name, error = %e, "file URLs rewritten unbound: the ledger could not bind them");
            }
        }
    }
    let root = format!("{}/agents/{name}/files/", base(state));
    substitute(origin, shape, doc, &root, &ids);
}

/// The ids bound, by (task id, URL as the agent wrote it).
type Ids = HashMap<(Option<String>, String), String>;

/// The URLs of `doc` on `origin` to bind, by the task they were named in (each once, at most
/// [`MAX_FILES`] a task, none longer than [`MAX_URL`]); `None` when it has none at all.
fn wanted<T: Tree>(
    origin: &Origin,
    shape: Shape,
    doc: &mut T,
) -> Option<Vec<(Option<String>, Vec<String>)>> {
    let mut wanted: Vec<(Option<String>, Vec<String>)> = Vec::new();
    let mut found = false;
    walk(doc, shape, &mut |task, url| {
        let Some(u) = url.text().filter(|u| origin.path_of(u).is_some()) else {
            return;
        };
        found = true;
        if u.len() > MAX_URL {
            return;
        }
        let i = match wanted.iter().position(|(t, _)| t.as_deref() == task) {
            Some(i) => i,
            None => {
                wanted.push((task.map(str::to_owned), Vec::new()));
                wanted.len() - 1
            }
        };
        let urls = &mut wanted[i].1;
        if !urls.iter().any(|have| have == u) && urls.len() < MAX_FILES {
            urls.push(u.to_owned());
        }
    });
    found.then_some(wanted)
}

/// Each URL of `doc` on `origin` replaced by `{root}{id}`: its bound id, else one bound to
/// nothing.
fn substitute<T: Tree>(origin: &Origin, shape: Shape, doc: &mut T, root: &str, ids: &Ids) {
    walk(doc, shape, &mut |task, url| {
        let Some(u) = url.text().filter(|u| origin.path_of(u).is_some()) else {
            return;
        };
        let id = ids
            .get(&(task.map(str::to_owned), u.to_owned()))
            .cloned()
            .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
        url.set_text(format!("{root}{id}"));
    });
}

/// The 404 of the file route: the same words for an unknown id and another client's file.
fn unknown(id: &str) -> ApiError {
    ApiError::new(
        Code::NotFound,
        format!(
            "file {:?} is not known to the gateway",
            id.chars().take(64).collect::<String>()
        ),
    )
}

/// The client's headers that go to the agent with a file fetch: what a download asks.
const FORWARDED: [&str; 5] = [
    "range",
    "if-range",
    "if-none-match",
    "if-modified-since",
    "accept",
];

/// `GET /agents/{name}/files/{id}` (see the module doc).
pub async fn serve(
    state: &State,
    ctx: &mut Ctx,
    agent: &Arc<Agent>,
    id: &str,
    req: &Request,
) -> ApiResult {
    if !valid_id(id) {
        return Err(unknown(id));
    }
    let name = agent.cfg.name.as_str();
    let file = state
        .ledger
        .file(id)
        .await?
        .filter(|f| *f.agent == *name)
        .ok_or_else(|| unknown(id))?;
    let visible = match &file.task {
        Some(key) => state
            .ledger
            .get(key)
            .await?
            .is_some_and(|r| *r.agent == *name && ctx.caller.sees(r.owner.as_deref())),
        None => ctx.caller.sees(file.owner.as_deref()),
    };
    if !visible {
        state
            .metrics
            .auth_failures
            .with_label_values(&["not_owner"])
            .inc();
        return Err(unknown(id));
    }
    // The origin the file was named on: the agent's, or one of its replicas'.
    let live = agent.replicas.live();
    let origin = std::iter::once(agent.cfg.url.as_str())
        .chain(live.iter().map(|r| &*r.base))
        .filter_map(Origin::parse)
        .find(|o| o.path_of(&file.url).is_some())
        .or_else(|| Origin::parse(&agent.cfg.url))
        .ok_or_else(|| unknown(id))?;
    let Some(path) = origin.path_of(&file.url).filter(|p| p.starts_with('/')) else {
        return Err(ApiError::new(
            Code::AgentProtocolViolation,
            format!("agent {name:?} named a file URL the gateway cannot read"),
        ));
    };
    let mut kept = HeaderMap::new();
    for h in FORWARDED {
        for v in req.headers().get_all(h) {
            kept.append(h, v.clone());
        }
    }
    let method = if req.method() == Method::HEAD {
        Method::HEAD
    } else {
        Method::GET
    };
    let mut up = new_request(method, format!("{}{path}", origin.base()), Bytes::new())?;
    *up.headers_mut() = upstream_headers(&kept, &ctx.peer_ip, ctx.https, &ctx.request_id, false);
    agent.authorize(up.headers_mut(), ctx.on_behalf())?;
    let mut res = pass_through(state, agent, ctx, up, agent.cfg.timeout).await?;
    // A file served through the gateway sets none of the gateway's cookies.
    res.headers_mut().remove(SET_COOKIE);
    if res.status().is_redirection() {
        let to_agent = res
            .headers()
            .get(LOCATION)
            .map(|l| l.to_str().map_or(true, |l| origin.path_of(l).is_some()));
        if to_agent == Some(true) {
            return Err(ApiError::new(
                Code::AgentProtocolViolation,
                format!("agent {name:?} redirected a file to its own origin; the gateway follows no redirects"),
            ));
        }
    }
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const AGENT: &str = "http://127.0.0.1:18103";

    /// A Task whose every Part a URL can hide in names the agent, each in another spelling,
    /// beside URLs elsewhere and free text that names it too.
    fn task() -> Value {
        json!({"id": "t1", "contextId": "c", "status": {"state": "TASK_STATE_WORKING",
            "message": {"messageId": "m1", "role": "ROLE_AGENT", "parts": [
                {"url": "http://localhost:18103/files/status.bin"}]}},
            "history": [{"messageId": "m0", "role": "ROLE_USER", "parts": [
                {"url": "http://127.1:18103/files/history.bin"},
                {"text": "see http://127.0.0.1:18103/readme"}]}],
            "artifacts": [{"artifactId": "a1", "description": "at http://127.0.0.1:18103/", "parts": [
                {"url": "http://127.0.0.1:18103/files/secret.bin", "filename": "secret.bin"},
                {"url": "HTTP://%31%32%37.0.0.1:18103/files/secret.bin"},
                {"url": "https://cdn.example.com/presigned?sig=1"},
                {"data": {"url": "http://127.0.0.1:18103/files/data"}},
                {"url": 7}],
                "metadata": {"from": "http://127.0.0.1:18103/"}}]})
    }

    fn ids_for(origin: &Origin, shape: Shape, doc: &mut Value) -> Ids {
        let mut ids = Ids::new();
        for (task, urls) in wanted(origin, shape, doc).expect("some") {
            for (i, u) in urls.into_iter().enumerate() {
                ids.insert((task.clone(), u), format!("id{i}"));
            }
        }
        ids
    }

    #[test]
    fn every_part_url_on_the_origin_is_rewritten_and_nothing_else() {
        let origin = Origin::parse(AGENT).expect("origin");
        let mut doc = task();
        let wanted = wanted(&origin, Shape::Task, &mut doc).expect("some");
        assert_eq!(wanted.len(), 1, "one task");
        assert_eq!(wanted[0].0.as_deref(), Some("t1"));
        assert_eq!(wanted[0].1.len(), 4, "each URL once: {:?}", wanted[0].1);
        let ids = ids_for(&origin, Shape::Task, &mut doc);
        substitute(
            &origin,
            Shape::Task,
            &mut doc,
            "https://gw.example/agents/a/files/",
            &ids,
        );
        let urls = |d: &Value| {
            let mut out = Vec::new();
            let mut d = d.clone();
            walk(&mut d, Shape::Task, &mut |_, u| out.push(u.clone()));
            out
        };
        for u in urls(&doc) {
            if let Some(u) = u.as_str() {
                assert!(
                    u.starts_with("https://gw.example/agents/a/files/id")
                        || u == "https://cdn.example.com/presigned?sig=1",
                    "{u}"
                );
            }
        }
        let parts = &doc["artifacts"][0]["parts"];
        // Two spellings are two recorded URLs (each fetched as the agent wrote it).
        assert_ne!(parts[0]["url"], parts[1]["url"]);
        assert_eq!(parts[0]["filename"], "secret.bin");
        assert_eq!(parts[4]["url"], 7);
        // Free text is the agent's content: as it came.
        let was = task();
        for at in [
            "/history/0/parts/1",
            "/artifacts/0/description",
            "/artifacts/0/parts/3",
            "/artifacts/0/metadata",
        ] {
            assert_eq!(doc.pointer(at), was.pointer(at), "{at}");
        }
    }

    #[test]
    fn a_document_read_in_place_is_rewritten_as_its_tree_is() {
        let origin = Origin::parse(AGENT).expect("origin");
        let response = json!({"task": task()});
        let raw = serde_json::to_vec(&response).expect("json");
        let mut tree = response.clone();
        let ids = ids_for(&origin, Shape::Response, &mut tree);
        substitute(&origin, Shape::Response, &mut tree, "https://gw/f/", &ids);
        let mut node = crate::protocol::json::read_in_place(&raw).expect("node");
        substitute(&origin, Shape::Response, &mut node, "https://gw/f/", &ids);
        assert_eq!(node.into_value(), tree);
        assert!(!tree
            .to_string()
            .replace("127.0.0.1:18103/readme", "")
            .contains("/files/secret"));
    }

    #[test]
    fn every_response_names_its_own_task() {
        let origin = Origin::parse(AGENT).expect("origin");
        let part = json!([{"url": "http://127.0.0.1:18103/f"}]);
        for (mut doc, task) in [
            (
                json!({"message": {"taskId": "t2", "parts": part}}),
                Some("t2"),
            ),
            (json!({"message": {"parts": part}}), None),
            (
                json!({"statusUpdate": {"taskId": "t3", "status": {"state": "TASK_STATE_COMPLETED",
                "message": {"parts": part}}}}),
                Some("t3"),
            ),
            (
                json!({"artifactUpdate": {"taskId": "t4", "artifact": {"parts": part}}}),
                Some("t4"),
            ),
        ] {
            let w = wanted(&origin, Shape::Response, &mut doc).expect("found");
            assert_eq!(w[0].0.as_deref(), task, "{doc}");
        }
        let done =
            json!({"statusUpdate": {"taskId": "t3", "status": {"state": "TASK_STATE_COMPLETED"}}});
        assert!(!live(&done, Shape::Response));
        assert!(live(&task(), Shape::Task));
        let mut none = json!({"task": {"id": "t", "artifacts": [{"parts": [{"url": "https://x.example/f"}]}]}});
        assert!(wanted(&origin, Shape::Response, &mut none).is_none());
        assert_eq!(Shape::of(A2aMethod::GetExtendedAgentCard), None);
    }
}
