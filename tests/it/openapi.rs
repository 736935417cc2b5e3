//! `GET /openapi.json` on a live gateway: public, the document compiled in, HEAD like the other
//! local routes; and the router and the served document agree both ways, checked by the route
//! parser and by real requests (every documented path and method reaches a handler, the other
//! method is 405 with the documented one in `Allow`).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::HeaderMap;
use hyper::Method;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use a2a_gateway::config::{Config, Right};
use a2a_gateway::http::openapi::DOCUMENT;
use a2a_gateway::http::route::{
    instantiate, instantiate_a2a, Route, A2A_TEMPLATES, A2A_TEST_AGENT, TEMPLATES,
};

use crate::auth::client;
use crate::support::a2a_script::{task, Answer, ScriptedAgent};
use crate::support::*;

/// A client with every right, so that no answer below is a refusal of the caller.
const KEY: &str = "openapi-key-0123456789abcdef";
const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

fn clients(cfg: &mut Config) {
    use Right::*;
    cfg.clients = vec![client(
        "all",
        KEY,
        &["*"],
        &[Tasks, Streams, Events, AllTasks, Metrics, Admin],
    )];
}

/// The agent is `scripts`, the name `route::instantiate` puts in `{name}`.
async fn gateway() -> (sample::SampleAgent, TestGateway) {
    single("scripts", clients).await
}

/// `scripts`, and an official A2A agent under the name `route::instantiate_a2a` puts in
/// `{name}`.
async fn two_protocols() -> (sample::SampleAgent, ScriptedAgent, TestGateway) {
    let scripted = ScriptedAgent::start(std::sync::Arc::new(|_, _| {
        Answer::Result(task("t/1:x", "c", "TASK_STATE_WORKING"))
    }))
    .await;
    let base = scripted.base.clone();
    let (a, g) = single("scripts", move |cfg| {
        clients(cfg);
        cfg.agents
            .push(crate::a2a_gateway::a2a_agent(A2A_TEST_AGENT, &base));
    })
    .await;
    (a, scripted, g)
}

/// Status, headers and body of a request as the all-rights client; for an event stream, which
/// would not end, only the head (the body is dropped, closing the stream).
async fn exchange(g: &TestGateway, method: Method, path: &str) -> (u16, HeaderMap, Bytes) {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let req = hyper::Request::builder()
        .method(method)
        .uri(format!("{}{path}", g.http.base))
        .header("authorization", format!("Bearer {KEY}"))
        .body(Full::new(Bytes::new()))
        .expect("request");
    let res = tokio::time::timeout(Duration::from_secs(20), client.request(req))
        .await
        .expect("an answer in time")
        .expect("an answer");
    let (parts, body) = res.into_parts();
    let stream = parts
        .headers
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let body = if stream {
        Bytes::new()
    } else {
        tokio::time::timeout(Duration::from_secs(20), body.collect())
            .await
            .expect("body in time")
            .expect("body")
            .to_bytes()
    };
    (parts.status.as_u16(), parts.headers, body)
}

/// The document's operations: (path, method).
fn operations(doc: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("path item").keys() {
            if METHODS.contains(&method.as_str()) {
                out.push((path.clone(), method.clone()));
            }
        }
    }
    out
}

#[tokio::test]
async fn the_document_is_public_and_the_one_built_in() {
    let (_a, g) = gateway().await;
    // No credentials, with clients configured: public like /healthz.
    let r = g.http.get("/openapi.json").await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert!(r.header("x-request-id").is_some());
    assert_eq!(r.body, DOCUMENT, "the served document is the repo's");
    let doc = r.json();
    assert!(doc["openapi"]
        .as_str()
        .is_some_and(|v| v.starts_with("3.1.")));
    // A wrong credential is not even read on a public route.
    let wrong = g
        .http
        .send(
            Method::GET,
            "/openapi.json",
            &[("authorization", "Bearer nobody")],
            Bytes::new(),
        )
        .await;
    assert_eq!(wrong.status, 200);
    // HEAD like the other local routes: the head of the GET, no body.
    let head = g
        .http
        .send(Method::HEAD, "/openapi.json", &[], Bytes::new())
        .await;
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-type"), Some("application/json"));
    assert!(head.body.is_empty());
    let post = g.http.post_empty("/openapi.json").await;
    assert_api_error(&post, 405, "METHOD_NOT_ALLOWED");
    assert_eq!(post.header("allow"), Some("GET"));
    // Counted under its own route label.
    let served = String::from_utf8(g.http.get_as("/metrics", KEY).await.body.to_vec())
        .expect("metrics are UTF-8");
    assert!(
        metric_value(
            &served,
            "a2a_gateway_requests_total",
            &[("route", "openapi"), ("status", "200")]
        ) >= 2.0,
        "{served}"
    );
}

#[tokio::test]
async fn the_router_and_the_served_document_agree() {
    let (_a, _s, g) = two_protocols().await;
    let doc = g.http.get("/openapi.json").await.json();
    let ops = operations(&doc);
    // Every route's template is documented, and nothing else is.
    let mut documented: Vec<&str> = ops.iter().map(|(p, _)| p.as_str()).collect();
    documented.sort_unstable();
    documented.dedup();
    let mut routed: Vec<&str> = TEMPLATES
        .iter()
        .copied()
        .chain(A2A_TEMPLATES.iter().map(|(t, _)| *t))
        .collect();
    routed.sort_unstable();
    routed.dedup();
    assert_eq!(documented, routed, "every route, and only routes");
    for (template, method) in &ops {
        let want = Method::from_bytes(method.to_ascii_uppercase().as_bytes()).expect("method");
        let a2a = A2A_TEMPLATES
            .iter()
            .find(|(t, methods)| t == template && methods.contains(&want.as_str()));
        // The path on the agent whose protocol serves this method there, and every method
        // that path takes on that agent.
        let (path, allowed): (String, Vec<String>) = match a2a {
            Some((_, methods)) => {
                let path = instantiate_a2a(template);
                let route = Route::parse_with(&path, |n| n == A2A_TEST_AGENT);
                assert!(route.is_a2a(), "{path}");
                assert_eq!(route.template(), Some(template.as_str()), "{path}");
                (path, methods.iter().map(|m| m.to_string()).collect())
            }
            None => {
                let path = instantiate(template);
                // A path is one route per method (`/tasks`: GET lists, POST creates), and each
                // route takes one method.
                let route = Route::parse(&path).with_method(&want);
                assert_eq!(route.template(), Some(template.as_str()), "{path}");
                assert_eq!(want, route.meta().1, "{template}");
                // (On a Clawpedia agent: the methods an A2A agent takes there are not its.)
                let a2a_methods: &[&str] = A2A_TEMPLATES
                    .iter()
                    .find(|(t, _)| t == template)
                    .map_or(&[], |(_, m)| m);
                let methods = ops
                    .iter()
                    .map(|(t, m)| (t, m.to_ascii_uppercase()))
                    .filter(|(t, m)| *t == template && !a2a_methods.contains(&m.as_str()))
                    .map(|(_, m)| m)
                    .collect();
                (path, methods)
            }
        };
        // The documented method reaches the route's handler: whatever it answers (an unknown
        // task is 404 TASK_NOT_FOUND, a push without its token 401), it is no route miss.
        let (status, _, body) = exchange(&g, want.clone(), &path).await;
        let miss = status == 405
            || (status == 404
                && serde_json::from_slice::<Value>(&body).is_ok_and(|e| {
                    e["error"]["code"] == "NOT_FOUND"
                        && e["error"]["message"]
                            .as_str()
                            .is_some_and(|m| m.starts_with("no route"))
                }));
        assert!(
            !miss,
            "{method} {path}: {status} {}",
            String::from_utf8_lossy(&body)
        );
        // Any other method is refused, naming the ones the path takes.
        let other = [Method::GET, Method::POST, Method::PUT]
            .into_iter()
            .find(|m| !allowed.iter().any(|a| a == m.as_str()))
            .expect("a method the path does not take");
        let (status, headers, _) = exchange(&g, other.clone(), &path).await;
        assert_eq!(status, 405, "{other} {path}");
        let mut allow: Vec<String> = headers
            .get("allow")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .split(',')
            .map(|m| m.trim().to_owned())
            .collect();
        allow.sort_unstable();
        let mut want_allow = allowed.clone();
        want_allow.sort_unstable();
        assert_eq!(allow, want_allow, "{other} {path}");
    }
    // And a path outside the document routes nowhere.
    let (status, _, body) = exchange(&g, Method::GET, "/openapi.yaml").await;
    assert_eq!(status, 404, "{}", String::from_utf8_lossy(&body));
}

/// The document promises `x-request-id` on every answer, the lean stream path's own refusals
/// included (a stream request that declares a body, a malformed head, a head over 16 KiB): the
/// client's id when the head could be read, a new one otherwise. Those answers are made before
/// the pipeline and used to go out without it.
#[tokio::test]
async fn the_lean_paths_own_refusals_carry_a_request_id() {
    let (_a, g) = gateway().await;
    let addr = g.gw.addr();
    let with_body = raw_request(
        addr,
        "GET /tasks/t-1/stream HTTP/1.1\nHost: gw\nx-request-id: mine-1\nContent-Length: 3",
        b"abc",
    )
    .await;
    assert_eq!(with_body.status, 400, "{with_body:?}");
    assert_eq!(with_body.json()["error"]["code"], "INVALID_REQUEST");
    assert_eq!(with_body.header("x-request-id"), Some("mine-1"));
    let malformed = raw_request(
        addr,
        "GET /tasks/t-1/stream HTTP/1.1\nHost: gw\nBad Header: 1",
        b"",
    )
    .await;
    assert_eq!(malformed.status, 400, "{malformed:?}");
    assert!(
        malformed
            .header("x-request-id")
            .is_some_and(|v| !v.is_empty()),
        "{malformed:?}"
    );
    let big = format!(
        "GET /tasks/t-1/stream HTTP/1.1\nHost: gw\nx-request-id: mine-2\nX-Big: {}",
        "a".repeat(20_000)
    );
    let too_large = raw_request(addr, &big, b"").await;
    assert_eq!(too_large.status, 431, "{too_large:?}");
    assert_eq!(too_large.json()["error"]["code"], "INVALID_REQUEST");
    assert!(
        too_large
            .header("x-request-id")
            .is_some_and(|v| !v.is_empty()),
        "{too_large:?}"
    );
}
