//! The one pipeline: a request on the lean HTTP/1.1 stream path and the same request over
//! HTTP/2 (h2c) are handled alike: request ids, error bodies and metrics labels.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{agent, parse_raw_response, TestGateway};

/// One GET over HTTP/2 with prior knowledge: (status, request id, body).
async fn h2_get(base: &str, path: &str, request_id: Option<&str>) -> (u16, Option<String>, Value) {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let mut req = hyper::Request::get(format!("{base}{path}"));
    if let Some(id) = request_id {
        req = req.header("x-request-id", id);
    }
    let res = client
        .request(req.body(Full::new(Bytes::new())).expect("request"))
        .await
        .expect("h2 request sent");
    assert_eq!(res.version(), hyper::Version::HTTP_2, "spoke HTTP/2");
    let status = res.status().as_u16();
    let id = res
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = res.into_body().collect().await.expect("body").to_bytes();
    (
        status,
        id,
        serde_json::from_slice(&body).expect("JSON body"),
    )
}

/// One GET on the lean path: an HTTP/1.1 head as an EventSource sends it, keep-alive (no
/// `Connection: close`), read until the server closes. Only the lean transport closes after
/// one answer here; hyper would keep the connection open and the read would time out.
async fn lean_get(
    addr: std::net::SocketAddr,
    path: &str,
    request_id: Option<&str>,
) -> (u16, Option<String>, Value, Option<String>) {
    let mut head = format!("GET {path} HTTP/1.1\r\nHost: gw\r\nAccept: text/event-stream\r\n");
    if let Some(id) = request_id {
        head.push_str(&format!("x-request-id: {id}\r\n"));
    }
    head.push_str("\r\n");
    let mut tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    tcp.write_all(head.as_bytes()).await.expect("head written");
    let mut raw = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        tcp.read_to_end(&mut raw),
    )
    .await
    .expect("the lean path closes the connection after its answer")
    .expect("read");
    let r = parse_raw_response(&raw);
    (
        r.status,
        r.header("x-request-id").map(str::to_owned),
        r.json(),
        r.header("connection").map(str::to_owned),
    )
}

#[tokio::test]
async fn lean_path_and_http2_share_one_pipeline() {
    let a = agent().await;
    let gw = TestGateway::start(&[("a", &a)], |cfg| {
        cfg.agents[0].passthrough_unknown_tasks = true
    })
    .await;
    gw.ready().await;
    let addr = gw.gw.addr();
    let base = gw.http.base.clone();

    for path in [
        // Unknown to the ledger: refused by the gateway itself.
        "/tasks/no-such-task/stream",
        // Under an agent's prefix (which passes unknown ids through): asked of the agent,
        // which has no such task.
        "/agents/a/tasks/no-such-task/stream",
    ] {
        // The client's request id is kept, on both paths.
        let (ls, lid, lbody, conn) = lean_get(addr, path, Some("req-lean-1")).await;
        let (hs, hid, hbody) = h2_get(&base, path, Some("req-h2-1")).await;
        // `connection: close` is written by the lean transport only: this request took it.
        assert_eq!(conn.as_deref(), Some("close"), "{path}: lean path taken");
        assert_eq!(lid.as_deref(), Some("req-lean-1"), "{path}");
        assert_eq!(hid.as_deref(), Some("req-h2-1"), "{path}");
        // The same answer, to the byte of the error body.
        assert_eq!(ls, 404, "{path}: {lbody}");
        assert_eq!(hs, ls, "{path}");
        assert_eq!(lbody["error"]["code"], "TASK_NOT_FOUND", "{path}: {lbody}");
        assert_eq!(lbody, hbody, "{path}");

        // Without one (or with an insane one), each path makes a fresh UUID.
        let (_, lid, _, _) = lean_get(addr, path, None).await;
        let (_, hid, _) = h2_get(&base, path, Some("bad id with spaces")).await;
        for id in [lid, hid] {
            let id = id.expect("a request id on every answer");
            assert!(uuid::Uuid::parse_str(&id).is_ok(), "{path}: fresh id {id}");
        }
    }

    // Counted alike: 2 requests per path per transport, under the same labels.
    let text = String::from_utf8(gw.http.get("/metrics").await.body.to_vec()).expect("utf8");
    let count = |agent: &str| {
        crate::support::metric_value(
            &text,
            "a2a_gateway_requests_total",
            &[("route", "stream"), ("agent", agent), ("status", "404")],
        )
    };
    // Agent-less: the gateway never resolved an agent; prefixed: the agent "a".
    assert_eq!(count(""), 4.0, "{text}");
    assert_eq!(count("a"), 4.0, "{text}");
}
