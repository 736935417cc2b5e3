//! Test support: start the real gateway on port 0 in front of real sample agents on loopback, and
//! talk to it over real HTTP.

use std::time::{Duration, Instant};

use a2a_gateway::config::{AgentConfig, Config};
use a2a_gateway::Gateway;
use a2a_sample_agent::{AgentOptions, SampleAgent};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::HeaderMap;
use hyper::{Method, Request};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

pub use a2a_sample_agent as sample;

pub mod a2a_calls;
pub mod a2a_script;
pub mod a2a_sdk;
pub mod a2a_v0_3;
pub mod cdp;
pub mod child;
pub mod collector;
pub mod dnsmasq;
pub mod grpc;
pub mod hook;
pub mod idp;
pub mod nginx;
pub mod process;
pub mod redis_cluster;
pub mod redis_server;
pub mod redis_tls;
pub mod sse;
pub mod tls;

/// An HTTP answer, read whole.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub version: hyper::Version,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    /// The gateway's error code, asserting the error body has the documented shape.
    pub fn error_code(&self) -> String {
        let j = self.json();
        assert!(
            j["error"]["message"].is_string(),
            "error body without message: {j}"
        );
        j["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("no error.code in {j}"))
            .to_owned()
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// An HTTP client towards one base URL: plain HTTP/1.1 ([`Http::new`]), or HTTPS with a TLS
/// client config of the test's own ([`Http::tls`]).
#[derive(Clone)]
pub struct Http {
    pub base: String,
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl Http {
    pub fn new(base: impl Into<String>) -> Http {
        // No roots: a plain client never verifies a certificate.
        let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
        Http::tls(base, tls)
    }

    /// HTTPS with `tls` as it is: its roots, its client certificate, and its ALPN protocols
    /// (`h2` negotiated means HTTP/2). Pooled connections are reused.
    pub fn tls(base: impl Into<String>, tls: rustls::ClientConfig) -> Http {
        Http::tls_pooled(base, tls, usize::MAX)
    }

    /// [`Http::tls`], keeping at most `idle` idle connections (0: every request on a new
    /// connection, and so a new handshake).
    pub fn tls_pooled(base: impl Into<String>, tls: rustls::ClientConfig, idle: usize) -> Http {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        Http {
            base: base.into(),
            client: Client::builder(TokioExecutor::new())
                .pool_max_idle_per_host(idle)
                .build(HttpsConnector::from((http, tls))),
        }
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Resp {
        self.try_send(method, path, headers, body)
            .await
            .unwrap_or_else(|e| panic!("request sent: {e}"))
    }

    /// [`Http::send`], with a failure to get an answer (refused, reset, a TLS alert) as `Err`.
    pub async fn try_send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Result<Resp, String> {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("{}{}", self.base, path));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(Full::new(body.into())).expect("request");
        let res = tokio::time::timeout(Duration::from_secs(20), self.client.request(req))
            .await
            .expect("gateway answered in time")
            .map_err(|e| format!("{e:?}"))?;
        let version = res.version();
        let (parts, body) = res.into_parts();
        let body = tokio::time::timeout(Duration::from_secs(20), body.collect())
            .await
            .expect("body in time")
            .map_err(|e| format!("body: {e}"))?
            .to_bytes();
        Ok(Resp {
            status: parts.status.as_u16(),
            version,
            headers: parts.headers,
            body,
        })
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send(Method::GET, path, &[], Bytes::new()).await
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> Resp {
        self.send(
            Method::POST,
            path,
            &[("content-type", "application/json")],
            serde_json::to_vec(body).expect("json"),
        )
        .await
    }

    /// POST `body` to agent `agent`'s notification endpoint, as the agent would, with
    /// `Bearer {token}` when a token is given.
    pub async fn push(&self, agent: &str, token: Option<&str>, body: &Value) -> Resp {
        let bearer = token.map(|t| format!("Bearer {t}"));
        let mut headers = vec![("content-type", "application/json")];
        if let Some(b) = bearer.as_deref() {
            headers.push(("authorization", b));
        }
        self.send(
            Method::POST,
            &format!("/agents/{agent}/notifications"),
            &headers,
            serde_json::to_vec(body).expect("json"),
        )
        .await
    }

    /// Push a Task to agent `agent`'s notification endpoint, as the agent would, with `token`.
    pub async fn push_task(&self, agent: &str, token: &str, task: &Value) -> Resp {
        self.push(agent, Some(token), &notification(task)).await
    }

    /// POST a valid create-task body to `/agents/{agent}/tasks` (route name or agent id).
    pub async fn post_task(&self, agent: &str) -> Resp {
        self.post_json(
            &format!("/agents/{agent}/tasks"),
            &serde_json::json!({ "input": good_input() }),
        )
        .await
    }

    /// POST a valid create-task body to `/agents/{agent}/tasks` as the client of `key`.
    pub async fn post_task_as(&self, agent: &str, key: &str) -> Resp {
        self.post_json_as(
            &format!("/agents/{agent}/tasks"),
            key,
            &serde_json::json!({ "input": good_input() }),
            &[],
        )
        .await
    }

    /// Create a task on `agent` (route name or agent id), asserting 202; its id.
    pub async fn create_task(&self, agent: &str) -> String {
        let r = self.post_task(agent).await;
        assert_eq!(r.status, 202, "{r:?}");
        r.json()["task_id"]
            .as_str()
            .expect("created task has a task_id")
            .to_owned()
    }

    /// Wait until `/readyz` answers 200 (every agent has had a card attempt).
    pub async fn ready(&self) {
        wait_for("gateway ready", || async {
            self.get("/readyz").await.status == 200
        })
        .await;
    }

    /// The value of one sample of a metric family, matched on all the given labels.
    pub async fn metric(&self, family: &str, labels: &[(&str, &str)]) -> f64 {
        let text = String::from_utf8(self.get("/metrics").await.body.to_vec()).expect("utf8");
        metric_value(&text, family, labels)
    }

    /// GET `path` as the client of `token` (`Authorization: Bearer {token}`).
    pub async fn get_as(&self, path: &str, token: &str) -> Resp {
        let auth = format!("Bearer {token}");
        self.send(Method::GET, path, &[("authorization", &auth)], Bytes::new())
            .await
    }

    /// POST `body` as JSON to `path` as the client of `token`, with `extra` headers.
    pub async fn post_json_as(
        &self,
        path: &str,
        token: &str,
        body: &Value,
        extra: &[(&str, &str)],
    ) -> Resp {
        let auth = format!("Bearer {token}");
        let mut headers = vec![
            ("content-type", "application/json"),
            ("authorization", &auth),
        ];
        headers.extend_from_slice(extra);
        self.send(
            Method::POST,
            path,
            &headers,
            serde_json::to_vec(body).expect("json"),
        )
        .await
    }

    pub async fn post_empty(&self, path: &str) -> Resp {
        self.send(Method::POST, path, &[], Bytes::new()).await
    }

    /// The response head and the live body, for streaming routes.
    pub async fn open(&self, path: &str) -> hyper::Response<hyper::body::Incoming> {
        let req = Request::get(format!("{}{}", self.base, path))
            .body(Full::new(Bytes::new()))
            .expect("request");
        self.client.request(req).await.expect("request sent")
    }
}

/// A gateway started in-process, and a client for it.
pub struct TestGateway {
    pub gw: Gateway,
    pub http: Http,
}

impl TestGateway {
    /// Start on port 0 in front of `agents` (route name, agent), with `tweak` applied to the config.
    pub async fn start(
        agents: &[(&str, &SampleAgent)],
        tweak: impl FnOnce(&mut Config),
    ) -> TestGateway {
        let cfgs = agents
            .iter()
            .map(|(name, a)| AgentConfig::new(name, &a.base_url()))
            .collect();
        let mut cfg = Config::with_agents("127.0.0.1:0".parse().expect("addr"), cfgs);
        tweak(&mut cfg);
        let gw = Gateway::start(cfg).await.expect("gateway starts");
        let http = Http::new(format!("http://{}", gw.addr()));
        TestGateway { gw, http }
    }

    /// Wait until every agent has had a card attempt (`/readyz` answers 200).
    pub async fn ready(&self) {
        self.http.ready().await
    }

    /// Create a task on `agent` (its route name) through the gateway, asserting 202; its id.
    pub async fn create_task(&self, agent: &str) -> String {
        self.http.create_task(agent).await
    }

    /// The value of one sample of a metric family, matched on all the given labels.
    pub async fn metric(&self, family: &str, labels: &[(&str, &str)]) -> f64 {
        self.http.metric(family, labels).await
    }

    /// Push `task` as agent `a` would, with [`TOKEN`] (see [`ingest`]).
    pub async fn push(&self, task: &Value) -> Resp {
        self.http.push_task("a", TOKEN, task).await
    }
}

/// One sample agent (default options) served as `name` behind a ready gateway, with `tweak`
/// applied to the config.
pub async fn single(name: &str, tweak: impl FnOnce(&mut Config)) -> (SampleAgent, TestGateway) {
    let a = agent().await;
    let g = TestGateway::start(&[(name, &a)], tweak).await;
    g.ready().await;
    (a, g)
}

/// The ingest token the tests give the agents that push notifications.
pub const TOKEN: &str = "ingest-token-0123456789abcdef";

/// Config tweak: the first agent takes pushes with [`TOKEN`].
pub fn ingest(cfg: &mut Config) {
    cfg.agents[0].ingest_token = Some(a2a_gateway::config::Secret::new(TOKEN));
}

/// The notification an agent pushes for `task`'s current state.
pub fn notification(task: &Value) -> Value {
    serde_json::json!({"event_type": "task.status.updated", "timestamp": a2a_gateway::protocol::time::now(), "data": task})
}

/// What a conformant task in `status` carries besides the status.
pub fn fields_for(status: &str) -> Value {
    match status {
        "COMPLETED" => serde_json::json!({ "output": { "summary": "done", "filename": "avg.py" } }),
        "FAILED" => {
            serde_json::json!({ "error": { "code": "E_TOOL", "message": "the tool crashed" } })
        }
        "INPUT_REQUIRED" => serde_json::json!({ "prompt": "which column?" }),
        _ => Value::Null,
    }
}

/// The agent moves its task to `status` (with what that state carries); the Task document it
/// would push.
pub fn moved(a: &SampleAgent, id: &str, status: &str) -> Value {
    a.set_status(id, status, fields_for(status))
        .expect("the agent knows the task")
}

/// A timestamp in the protocol's format for `ms` since the epoch.
pub fn stamp(ms: i64) -> String {
    a2a_gateway::protocol::time::format(
        chrono::DateTime::from_timestamp_millis(ms).expect("a representable instant"),
    )
}

/// The agent's task rewritten to `status` at `updated_at = ms` (without changing what the agent
/// holds): a well-formed answer or push that only the state machine can refuse.
pub fn doc_at(a: &SampleAgent, id: &str, status: &str, ms: i64) -> Value {
    let mut t = a.task(id).expect("the agent knows the task");
    t["status"] = serde_json::json!(status);
    t["updated_at"] = serde_json::json!(stamp(ms));
    if let Value::Object(extra) = fields_for(status) {
        t.as_object_mut().expect("task object").extend(extra);
    }
    t
}

/// Find `family{...labels...} value` in a Prometheus text exposition; 0 when absent.
pub fn metric_value(text: &str, family: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(family) && l[family.len()..].starts_with(['{', ' ']))
        .filter(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A sample agent with default options and the given card.
pub async fn agent() -> SampleAgent {
    SampleAgent::start(AgentOptions::default())
        .await
        .expect("agent starts")
}

pub async fn agent_with(opts: AgentOptions) -> SampleAgent {
    SampleAgent::start(opts).await.expect("agent starts")
}

/// Poll `check` every 20 ms for up to 10 s.
pub async fn wait_for<F, Fut>(what: &str, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    wait_for_within(what, Duration::from_secs(10), check).await
}

/// Poll `check` every 20 ms for up to `limit`.
pub async fn wait_for_within<F, Fut>(what: &str, limit: Duration, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    assert!(within(limit, check).await, "timed out waiting for: {what}");
}

/// Whether `check` turns true within `limit`, polled every 20 ms: for a test that says more
/// than what it waited for when the wait fails (the state it reached, a process's log).
pub async fn within<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !check().await {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// A valid input for the sample agents' card.
pub fn good_input() -> Value {
    serde_json::json!({"topic": "averages of a CSV column", "filename": "avg.py"})
}

/// Path of the built gateway binary (for tests of the command line).
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_a2a-gateway")
}

/// An answer read off a raw TCP exchange (see [`raw_request`]).
#[derive(Debug)]
pub struct RawResp {
    pub status: u16,
    /// Header names lower-cased, in the order received.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// Send `head` (request line and headers, without the blank line) and `body` exactly as given over
/// a fresh TCP connection, for what a well-behaved client library will not send (chunked bodies,
/// hop-by-hop headers, unnormalised paths). `Connection: close` is added so the answer ends at EOF.
pub async fn raw_request(addr: std::net::SocketAddr, head: &str, body: &[u8]) -> RawResp {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut tcp = tokio::net::TcpStream::connect(addr)
            .await
            .expect("connect to the gateway");
        let mut req = head
            .trim_end()
            .replace('\n', "\r\n")
            .replace("\r\r\n", "\r\n")
            .into_bytes();
        req.extend_from_slice(b"\r\nConnection: close\r\n\r\n");
        req.extend_from_slice(body);
        tcp.write_all(&req).await.expect("request written");
        let mut out = Vec::new();
        // A server may answer and close before reading all of a refused body: a reset after
        // the answer arrived is not an error here.
        let mut buf = [0u8; 16 * 1024];
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
        out
    };
    let raw = tokio::time::timeout(Duration::from_secs(20), exchange)
        .await
        .expect("raw exchange in time");
    parse_raw_response(&raw)
}

/// An answer read whole off a socket: status line, headers, and the body (de-chunked).
pub fn parse_raw_response(raw: &[u8]) -> RawResp {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| {
            panic!(
                "no complete response head in {:?}",
                String::from_utf8_lossy(raw)
            )
        });
    let head = std::str::from_utf8(&raw[..split]).expect("response head is UTF-8");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("status line");
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    if chunked {
        body = dechunk(&body);
    }
    RawResp {
        status,
        headers,
        body,
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = data.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size = std::str::from_utf8(&data[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next().unwrap_or("").trim(), 16).ok());
        let Some(size) = size.filter(|n| *n > 0) else {
            return out;
        };
        let start = eol + 2;
        let end = (start + size).min(data.len());
        out.extend_from_slice(&data[start..end]);
        data = data.get(end + 2..).unwrap_or_default();
    }
}

/// Assert `r` is an error of the gateway's own with this status and code, in the documented
/// shape `{"error":{"code","message","details"?}}` and nothing else; returns the `error` object.
pub fn assert_api_error(r: &Resp, status: u16, code: &str) -> Value {
    assert_eq!(r.status, status, "expected {status} {code}, got {r:?}");
    assert!(
        r.header("content-type")
            .is_some_and(|ct| ct.starts_with("application/json")),
        "error without a JSON content type: {r:?}"
    );
    let j = r.json();
    let outer = j
        .as_object()
        .unwrap_or_else(|| panic!("error body is not an object: {j}"));
    assert_eq!(outer.len(), 1, "error body has keys besides `error`: {j}");
    let err = outer
        .get("error")
        .and_then(Value::as_object)
        .unwrap_or_else(|| panic!("no `error` object in {j}"));
    assert_eq!(err.get("code").and_then(Value::as_str), Some(code), "{j}");
    assert!(
        err.get("message")
            .and_then(Value::as_str)
            .is_some_and(|m| !m.is_empty()),
        "error without a message: {j}"
    );
    assert!(
        err.keys()
            .all(|k| ["code", "message", "details"].contains(&k.as_str())),
        "unexpected keys in {j}"
    );
    Value::Object(err.clone())
}
