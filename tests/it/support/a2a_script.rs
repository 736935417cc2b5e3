//! A scripted official A2A agent for tests: a real HTTP server on loopback serving a card at
//! `/.well-known/agent-card.json` and a JSON-RPC endpoint at `/rpc`, whose every answer a test
//! scripts — including the ones an honest agent never gives (another task's id, an unknown
//! state, a 10 MB body, duplicate keys, a task reopened after it completed, no answer in time).
//! It records every call it receives. A hostile test makes it serve files of its own at paths
//! of its choice and put headers of its choice on every JSON-RPC answer. It can be killed (its
//! listener closed and every connection cut mid-answer, as a killed process's are) and brought
//! back on the same port.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};

/// What the agent answers to one call.
pub enum Answer {
    /// `{"jsonrpc","id","result": v}`.
    Result(Value),
    /// These bytes as the whole body (status 200).
    Raw(Vec<u8>),
    /// This HTTP status with these bytes.
    Status(u16, Vec<u8>),
    /// After a delay.
    Later(Duration, Box<Answer>),
    /// Once the test lets it go (or after the delay, whichever is first): a hold that lasts
    /// exactly as long as the test needs it, however slow the machine.
    Until(Arc<tokio::sync::Notify>, Duration, Box<Answer>),
    /// An event stream (`text/event-stream`) of what the test sends, for as long as it keeps
    /// the sender: each value as `data: {"jsonrpc","id","result": v}`, a string as the raw
    /// data line it is (anything, valid or not).
    Events(tokio::sync::mpsc::Receiver<Value>),
}

/// An agent's event stream for [`Answer::Events`]: the sender the test feeds, the answer.
pub fn events() -> (tokio::sync::mpsc::Sender<Value>, Answer) {
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    (tx, Answer::Events(rx))
}

/// A response body fed by a channel, ending when the sender is dropped.
struct Fed(tokio::sync::mpsc::Receiver<Bytes>);

impl hyper::body::Body for Fed {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|o| o.map(|b| Ok(hyper::body::Frame::data(b))))
    }
}

type Out = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn full(b: impl Into<Bytes>) -> Out {
    Full::new(b.into()).boxed()
}

/// The script: (method, params) to an answer.
pub type Script = Arc<dyn Fn(&str, &Value) -> Answer + Send + Sync>;

/// A file the agent serves on a GET of its path: status, headers, body.
type Served = (u16, Vec<(String, String)>, Vec<u8>);

struct Shared {
    card: Mutex<Value>,
    script: Script,
    calls: Mutex<Vec<Value>>,
    /// Files by path (without the query).
    files: Mutex<std::collections::HashMap<String, Served>>,
    /// Headers put on every JSON-RPC answer.
    headers: Mutex<Vec<(String, String)>>,
    /// `METHOD /path?query` of every request received, in order.
    requests: Mutex<Vec<String>>,
}

/// A running scripted agent (stopped when dropped).
pub struct ScriptedAgent {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    addr: std::net::SocketAddr,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
    /// Every connection it serves, to be cut by [`ScriptedAgent::kill`].
    conns: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl Drop for ScriptedAgent {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A valid A2A 1.0 card with one JSON-RPC interface at `url`.
pub fn card(url: &str) -> Value {
    json!({
        "name": "Scripted", "description": "answers as the test says", "version": "1.0.0",
        "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": false, "pushNotifications": false},
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "script", "name": "Script", "description": "scripted", "tags": []}]
    })
}

/// A Task in `state`, now.
pub fn task(id: &str, context: &str, state: &str) -> Value {
    json!({"id": id, "contextId": context, "status": {"state": state,
        "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)}})
}

impl ScriptedAgent {
    /// Start, answering with `script`; its card names its own `/rpc`.
    pub async fn start(script: Script) -> ScriptedAgent {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let base = format!("http://{addr}");
        let shared = Arc::new(Shared {
            card: Mutex::new(card(&format!("{base}/rpc"))),
            script,
            calls: Mutex::new(Vec::new()),
            files: Mutex::default(),
            headers: Mutex::default(),
            requests: Mutex::default(),
        });
        let conns = Arc::new(Mutex::new(Vec::new()));
        let server = serve(listener, shared.clone(), conns.clone());
        ScriptedAgent {
            base,
            addr,
            shared,
            server,
            conns,
        }
    }

    /// As a killed process: the listener closed (connections refused) and every open
    /// connection cut, answers and streams mid-way included.
    pub fn kill(&mut self) {
        self.server.abort();
        for c in self.conns.lock().expect("lock").drain(..) {
            c.abort();
        }
    }

    /// Back on the same port, with the same script and the calls recorded so far.
    pub async fn revive(&mut self) {
        self.kill();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let listener = loop {
            match tokio::net::TcpListener::bind(self.addr).await {
                Ok(l) => break l,
                Err(e) if std::time::Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("the agent cannot bind {} again: {e}", self.addr),
            }
        };
        self.server = serve(listener, self.shared.clone(), self.conns.clone());
    }

    /// Serve `card` from now on.
    pub fn set_card(&self, card: Value) {
        *self.shared.card.lock().expect("lock") = card;
    }

    /// Serve `body` (with `status` and `headers`) on a GET of `path`.
    pub fn serve_file(&self, path: &str, status: u16, headers: &[(&str, &str)], body: &[u8]) {
        let headers = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.shared
            .files
            .lock()
            .expect("lock")
            .insert(path.to_owned(), (status, headers, body.to_vec()));
    }

    /// Put these headers on every JSON-RPC answer from now on.
    pub fn set_headers(&self, headers: &[(&str, &str)]) {
        *self.shared.headers.lock().expect("lock") = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    }

    /// `METHOD /path?query` of every request received (the card's and files' too), in order.
    pub fn requests(&self) -> Vec<String> {
        self.shared.requests.lock().expect("lock").clone()
    }

    /// Every JSON-RPC request received, as sent.
    pub fn calls(&self) -> Vec<Value> {
        self.shared.calls.lock().expect("lock").clone()
    }

    /// The methods received, in order.
    pub fn methods(&self) -> Vec<String> {
        self.calls()
            .iter()
            .filter_map(|c| c["method"].as_str().map(str::to_owned))
            .collect()
    }
}

/// Accept on `listener`, each connection served by a task of its own, kept in `conns`.
fn serve(
    listener: tokio::net::TcpListener,
    s: Arc<Shared>,
    conns: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let s = s.clone();
            let conn = tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| handle(s.clone(), req));
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
            let mut held = conns.lock().expect("lock");
            held.retain(|c| !c.is_finished());
            held.push(conn.abort_handle());
        }
    })
}

async fn handle(s: Arc<Shared>, req: Request<Incoming>) -> Result<Response<Out>, Infallible> {
    let path = req.uri().path().to_owned();
    let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
    s.requests
        .lock()
        .expect("lock")
        .push(format!("{} {target}", req.method()));
    if req.method() == hyper::Method::GET && path != "/.well-known/agent-card.json" {
        let served = s.files.lock().expect("lock").get(&path).cloned();
        let (status, headers, body) =
            served.unwrap_or_else(|| (404, Vec::new(), b"no such file".to_vec()));
        let mut res = Response::new(full(body));
        *res.status_mut() = hyper::StatusCode::from_u16(status).expect("status");
        for (k, v) in headers {
            res.headers_mut().append(
                hyper::header::HeaderName::from_bytes(k.as_bytes()).expect("name"),
                hyper::header::HeaderValue::from_str(&v).expect("value"),
            );
        }
        return Ok(res);
    }
    let extra = s.headers.lock().expect("lock").clone();
    let mut res = rpc(&s, req).await?;
    for (k, v) in extra {
        res.headers_mut().append(
            hyper::header::HeaderName::from_bytes(k.as_bytes()).expect("name"),
            hyper::header::HeaderValue::from_str(&v).expect("value"),
        );
    }
    Ok(res)
}

/// The card, or a JSON-RPC call answered as the script says.
async fn rpc(s: &Arc<Shared>, req: Request<Incoming>) -> Result<Response<Out>, Infallible> {
    let path = req.uri().path().to_owned();
    let headers = req.headers().clone();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    if path == "/.well-known/agent-card.json" {
        let card = s.card.lock().expect("lock").clone();
        return Ok(Response::new(full(card.to_string())));
    }
    let call: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut recorded = call.clone();
    recorded["headers"] = json!({
        "a2a-version": headers.get("a2a-version").and_then(|v| v.to_str().ok()),
        "authorization": headers.get("authorization").and_then(|v| v.to_str().ok()),
        "a2a-extensions": headers.get("a2a-extensions").and_then(|v| v.to_str().ok()),
    });
    s.calls.lock().expect("lock").push(recorded);
    let script = s.script.clone();
    let mut answer = script(call["method"].as_str().unwrap_or(""), &call["params"]);
    loop {
        match answer {
            Answer::Later(d, next) => {
                tokio::time::sleep(d).await;
                answer = *next;
            }
            Answer::Until(go, most, next) => {
                let _ = tokio::time::timeout(most, go.notified()).await;
                answer = *next;
            }
            Answer::Result(v) => {
                let body = json!({"jsonrpc": "2.0", "id": call["id"], "result": v});
                return Ok(Response::new(full(body.to_string())));
            }
            Answer::Raw(bytes) => return Ok(Response::new(full(bytes))),
            Answer::Events(mut rx) => {
                let (tx, body) = tokio::sync::mpsc::channel::<Bytes>(64);
                let id = call["id"].clone();
                tokio::spawn(async move {
                    while let Some(v) = rx.recv().await {
                        let data = match v {
                            Value::String(s) => s,
                            v => json!({"jsonrpc": "2.0", "id": id, "result": v}).to_string(),
                        };
                        if tx
                            .send(Bytes::from(format!("data: {data}\n\n")))
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                });
                let mut res = Response::new(Fed(body).boxed());
                res.headers_mut().insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static("text/event-stream"),
                );
                return Ok(res);
            }
            Answer::Status(status, bytes) => {
                let mut res = Response::new(full(bytes));
                *res.status_mut() =
                    hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::BAD_GATEWAY);
                return Ok(res);
            }
        }
    }
}
