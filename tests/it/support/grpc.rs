//! A raw gRPC client of A2A's service for the integration tests, over h2c: a test sees the
//! status, its details and each message exactly as they went on the wire (the SDK tests see
//! what a2a-sdk makes of them). Messages are written and read as ProtoJSON by `a2a_grpc`.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::HeaderMap;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use a2a_grpc::{frame, json, status};

/// A gRPC call's answer: its head, its messages, and its status (from the trailers, or from
/// the head of a trailers-only answer).
#[derive(Debug)]
pub struct Answer {
    /// The head's headers.
    pub head: HeaderMap,
    /// Each message as ProtoJSON.
    pub messages: Vec<Value>,
    /// `grpc-status`.
    pub code: u32,
    /// The status as the HTTP+JSON binding writes an error (`{"error": {...}}`), and the
    /// RetryInfo's delay.
    pub status: Value,
    /// RetryInfo's delay, if sent.
    pub retry: Option<Duration>,
}

impl Answer {
    /// The ErrorInfo reason of a failed call.
    pub fn reason(&self) -> &str {
        self.status["error"]["details"][0]["reason"]
            .as_str()
            .unwrap_or("")
    }
}

/// An open server stream.
pub struct Stream {
    body: Incoming,
    messages: frame::Deframer,
    /// The status once the stream ended.
    pub ended: Option<(u32, Value)>,
}

fn client() -> Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http()
}

fn request(
    base: &str,
    method: &str,
    msg: &Value,
    metadata: &[(&str, &str)],
) -> hyper::Request<Full<Bytes>> {
    let body = match a2a_grpc::rpc(method) {
        Some(rpc) => frame::encode(&json::to_bytes(&rpc.input, msg).expect("a valid message")),
        None => frame::encode(b""),
    };
    let mut req = hyper::Request::builder()
        .method("POST")
        .uri(format!("{base}/lf.a2a.v1.A2AService/{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (k, v) in metadata {
        req = req.header(*k, *v);
    }
    req.body(Full::new(body)).expect("a request")
}

/// `metadata` with `authorization: Bearer token` when a token is given.
pub fn bearer(token: Option<&str>) -> Vec<(&'static str, String)> {
    token
        .map(|t| vec![("authorization", format!("Bearer {t}"))])
        .unwrap_or_default()
}

/// A unary call of `method` with `msg` (ProtoJSON) to the gateway at `base` (`http://...`).
pub async fn call(base: &str, method: &str, msg: &Value, metadata: &[(&str, &str)]) -> Answer {
    call_path(
        base,
        &format!("/lf.a2a.v1.A2AService/{method}"),
        method,
        msg,
        metadata,
    )
    .await
}

/// [`call`] at another path (0.3's service, say), the message written as `method`'s.
pub async fn call_path(
    base: &str,
    path: &str,
    method: &str,
    msg: &Value,
    metadata: &[(&str, &str)],
) -> Answer {
    let mut req = request(base, method, msg, metadata);
    *req.uri_mut() = format!("{base}{path}").parse().expect("a URI");
    let res = client().request(req).await.expect("the gateway answers");
    assert_eq!(res.status(), 200, "gRPC answers HTTP 200: {res:?}");
    let (parts, body) = res.into_parts();
    let collected = body.collect().await.expect("a whole body");
    let trailers = collected.trailers().cloned();
    let data = collected.to_bytes();
    let rpc = a2a_grpc::rpc(method);
    let mut d = frame::Deframer::new(16 << 20);
    d.push(&data);
    let mut messages = Vec::new();
    while let Some(m) = d.next_message().expect("gRPC framing") {
        let out = rpc.as_ref().expect("a known method").output.clone();
        messages.push(json::to_json(&out, &m).expect("the method's response"));
    }
    let (code, status, retry) = read_status(trailers.as_ref().unwrap_or(&parts.headers));
    Answer {
        head: parts.headers,
        messages,
        code,
        status,
        retry,
    }
}

fn read_status(h: &HeaderMap) -> (u32, Value, Option<Duration>) {
    let text = |n: &str| h.get(n).and_then(|v| v.to_str().ok());
    let code: u32 = text("grpc-status")
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no grpc-status in {h:?}"));
    let (status, retry) = status::read(
        code,
        text("grpc-message").unwrap_or(""),
        text("grpc-status-details-bin"),
    );
    (code, status, retry)
}

/// A server-streaming call: the open stream, or the answer of a call refused before it.
pub async fn open(
    base: &str,
    method: &str,
    msg: &Value,
    metadata: &[(&str, &str)],
) -> Result<Stream, Answer> {
    let req = request(base, method, msg, metadata);
    let res = client().request(req).await.expect("the gateway answers");
    assert_eq!(res.status(), 200, "gRPC answers HTTP 200");
    if res.headers().contains_key("grpc-status") {
        let (code, status, retry) = read_status(res.headers());
        return Err(Answer {
            head: res.headers().clone(),
            messages: Vec::new(),
            code,
            status,
            retry,
        });
    }
    Ok(Stream {
        body: res.into_body(),
        messages: frame::Deframer::new(16 << 20),
        ended: None,
    })
}

impl Stream {
    /// The next StreamResponse (ProtoJSON) within `wait`; `None` once the stream ended (its
    /// status in [`Stream::ended`]) or nothing came in time.
    pub async fn next(&mut self, wait: Duration) -> Option<Value> {
        let desc = a2a_grpc::stream_response();
        loop {
            if let Some(m) = self.messages.next_message().expect("gRPC framing") {
                return Some(json::to_json(&desc, &m).expect("a StreamResponse"));
            }
            if self.ended.is_some() {
                return None;
            }
            let frame = match tokio::time::timeout(wait, self.body.frame()).await {
                Ok(Some(Ok(f))) => f,
                Ok(Some(Err(e))) => panic!("the stream failed: {e}"),
                Ok(None) => panic!("the stream ended without a status"),
                Err(_) => return None,
            };
            match frame.into_data() {
                Ok(d) => self.messages.push(&d),
                Err(f) => {
                    if let Ok(t) = f.into_trailers() {
                        let (code, status, _) = read_status(&t);
                        self.ended = Some((code, status));
                    }
                }
            }
        }
    }
}
