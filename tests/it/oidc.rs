//! `[[auth.oidc]]` against a real identity provider: node's oidc-provider (OpenID Certified,
//! tests/node/oidc-provider.mjs) on loopback, issuing client-credentials access tokens as JWTs
//! (RFC 9068, `typ: at+jwt`). The gateway finds its keys by discovery, follows its key rotation
//! without a reload, refuses a withdrawn key's tokens, and starts with the provider down:
//! token clients get 503 AUTH_UNAVAILABLE until its keys arrive, key clients are served
//! throughout, `/readyz` stays 200 and says what is degraded. A token's rights are its
//! scopes' (`[[auth.oidc]] scopes`), never its claims': a read-only scope reads and lists its
//! subject's tasks and is refused SendMessage on every wire form, and a token without a
//! mapped scope may do nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use hyper::Method;
use serde_json::{json, Value};

use a2a_gateway::config::{Config, OidcConfig, Right, ScopeRights};

use crate::a2a_gateway::a2a_agent;
use crate::support::a2a_calls::{
    assert_forbidden, error_code, grpc_send, message, raw, reason, rest, rpc, send_03, two_clients,
    ALICE, OPS,
};
use crate::support::grpc;
use crate::support::idp::{claims, free_port, header, keys_held, Idp, AUDIENCE};
use crate::support::*;

/// The provider as an `[[auth.oidc]]` issuer. Its tokens' rights are their scopes': `a2a` and
/// `a2a.send` may create tasks and stream, `a2a.read` may read and list tasks, nothing more
/// (the `a2a_can` and `a2a_agents` claims every token carries grant nothing).
fn oidc(issuer: &str) -> OidcConfig {
    let send = ScopeRights {
        can: vec![Right::Tasks, Right::Streams],
        ..ScopeRights::default()
    };
    let read = ScopeRights {
        can: vec![Right::Tasks],
        methods: vec!["GetTask".into(), "ListTasks".into()],
        ..ScopeRights::default()
    };
    OidcConfig {
        name: "corp".into(),
        issuer: issuer.into(),
        audience: AUDIENCE.into(),
        scopes: BTreeMap::from([
            ("a2a".into(), send.clone()),
            ("a2a.send".into(), send),
            ("a2a.read".into(), read),
        ]),
        ..OidcConfig::default()
    }
}

async fn send_message(http: &Http, token: &str) -> Resp {
    let body = json!({"jsonrpc": "2.0", "id": "c-1", "method": "SendMessage",
        "params": message("hello", json!({}))});
    let auth = format!("Bearer {token}");
    http.send(
        Method::POST,
        "/agents/echo/jsonrpc",
        &[
            ("content-type", "application/json"),
            ("a2a-version", "1.0"),
            ("authorization", &auth),
        ],
        Bytes::from(body.to_string()),
    )
    .await
}

/// A JSON-RPC SendMessage that went through to the agent.
fn answered(r: &Resp) -> bool {
    r.status == 200 && r.json().get("result").is_some()
}

async fn metric(http: &Http, family: &str, labels: &[(&str, &str)]) -> f64 {
    let text = String::from_utf8(http.get_as("/metrics", OPS).await.body.to_vec()).expect("utf8");
    metric_value(&text, family, labels)
}

async fn gateway(
    issuer: &str,
    tweak: impl FnOnce(&mut Config),
) -> (Vec<Box<dyn std::any::Any>>, Http) {
    let echo = a2a_sample_agent::SampleAgent::start(a2a_sample_agent::AgentOptions::a2a("Echo"))
        .await
        .expect("sample agent starts");
    let clawpedia = agent().await;
    let mut cfg = Config::with_agents(
        "127.0.0.1:0".parse().expect("addr"),
        vec![
            a2a_agent("echo", &echo.base_url()),
            a2a_gateway::config::AgentConfig::new("c", &clawpedia.base_url()),
        ],
    );
    two_clients(&mut cfg);
    cfg.auth.oidc = vec![oidc(issuer)];
    // The tests poll as one token subject: its own rate is not what they measure.
    cfg.auth.token_rate_per_sec = 10_000.0;
    tweak(&mut cfg);
    let gw = a2a_gateway::Gateway::start(cfg)
        .await
        .expect("gateway starts");
    let http = Http::new(format!("http://{}", gw.addr()));
    http.ready().await;
    (
        vec![Box::new(echo), Box::new(clawpedia), Box::new(gw)],
        http,
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_providers_tokens_get_through_and_follow_its_key_rotation_without_a_reload() {
    let idp = Idp::start(free_port()).await;
    let (_keep, http) = gateway(&idp.issuer, |_| {}).await;
    keys_held(&http, "corp", OPS).await;
    assert!(
        metric(
            &http,
            "a2a_gateway_jwks_fetches_total",
            &[("issuer", "corp"), ("outcome", "ok")]
        )
        .await
            >= 1.0
    );
    let first = idp.token().await;
    assert_eq!(header(&first)["typ"], "at+jwt", "an RFC 9068 access token");
    // The official A2A sample agent, over JSON-RPC.
    let r = send_message(&http, &first).await;
    assert!(answered(&r), "{r:?}");
    // A Clawpedia create.
    let body = json!({ "input": good_input() });
    let r = http
        .post_json_as("/agents/c/tasks", &first, &body, &[])
        .await;
    assert_eq!(r.status, 202, "{r:?}");
    // The served card names the provider's discovery document.
    let card = http
        .get_as("/agents/echo/.well-known/agent-card.json", ALICE)
        .await
        .json();
    let discovery = format!("{}/.well-known/openid-configuration", idp.issuer);
    assert_eq!(
        card["securitySchemes"]["oidc-corp"]["openIdConnectSecurityScheme"]["openIdConnectUrl"],
        discovery.as_str(),
        "{card}"
    );

    // The provider rotates: a new key published, the old one withdrawn. A token of the new key
    // names a kid the gateway does not hold: it fetches the keys at once (no reload, no wait
    // for jwks_refresh_secs, 300 s here), and that very request waits for the fetch: it is
    // served, not refused (an SDK client does not retry a 401).
    idp.rotate().await;
    let second = idp.token().await;
    assert_ne!(header(&second)["kid"], header(&first)["kid"]);
    let r = send_message(&http, &second).await;
    assert!(answered(&r), "the first request with the new key: {r:?}");
    // The withdrawn key's token is refused, cached or not.
    let r = send_message(&http, &first).await;
    assert_eq!(r.status, 401, "{r:?}");
    assert_eq!(reason(&r.json()), "UNAUTHORIZED", "{r:?}");
    let r = http
        .post_json_as("/agents/c/tasks", &first, &body, &[])
        .await;
    assert_api_error(&r, 401, "UNAUTHORIZED");
    assert!(
        metric(
            &http,
            "a2a_gateway_jwks_fetches_total",
            &[("issuer", "corp"), ("outcome", "ok")]
        )
        .await
            >= 2.0
    );
    // A key client is untouched.
    assert_eq!(http.post_task_as("c", ALICE).await.status, 202);
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_provider_down_at_start_token_clients_wait_and_key_clients_are_served() {
    let port = free_port();
    let issuer = format!("http://127.0.0.1:{port}");
    let (_keep, http) = gateway(&issuer, |_| {}).await;
    // Ready all the same, and saying what is degraded.
    let r = http.get("/readyz").await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["degraded"], json!(["oidc:corp"]), "{r:?}");
    wait_for("a failed fetch is counted", || async {
        metric(
            &http,
            "a2a_gateway_jwks_fetches_total",
            &[("issuer", "corp"), ("outcome", "error")],
        )
        .await
            >= 1.0
    })
    .await;
    // A token of that issuer cannot be checked yet: 503, not 401 (signed by any key: no key
    // is held to tell).
    let claims = json!({"sub": "orchestrator", "iss": issuer, "aud": AUDIENCE,
        "iat": crate::jwt::now(), "exp": crate::jwt::now() + 600,
        "a2a_agents": ["*"], "a2a_can": ["tasks"]});
    let early = crate::jwt::sign(jsonwebtoken::Algorithm::ES256, "ec-1", &claims);
    let body = json!({ "input": good_input() });
    let r = http
        .post_json_as("/agents/c/tasks", &early, &body, &[])
        .await;
    assert_api_error(&r, 503, "AUTH_UNAVAILABLE");
    assert!(r.header("retry-after").is_some(), "{r:?}");
    // On A2A JSON-RPC, the gateway's -32000 with the code as the reason.
    let r = send_message(&http, &early).await;
    assert_eq!(r.status, 503, "{r:?}");
    assert!(r.header("retry-after").is_some(), "{r:?}");
    assert_eq!(r.json()["error"]["code"], -32000, "{r:?}");
    assert_eq!(reason(&r.json()), "AUTH_UNAVAILABLE", "{r:?}");
    // A key client is served meanwhile.
    assert_eq!(http.post_task_as("c", ALICE).await.status, 202);

    // The provider comes up: its tokens work once the gateway holds its keys.
    let idp = Idp::start(port).await;
    let token = idp.token().await;
    wait_for_within(
        "the provider's tokens are accepted",
        Duration::from_secs(15),
        || async { answered(&send_message(&http, &token).await) },
    )
    .await;
    // The token signed by no key of the provider is now refused as what it is.
    let r = http
        .post_json_as("/agents/c/tasks", &early, &body, &[])
        .await;
    assert_api_error(&r, 401, "UNAUTHORIZED");
    let r = http.get("/readyz").await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["degraded"], json!([]), "{r:?}");
    assert_eq!(
        metric(&http, "a2a_gateway_jwks_keys", &[("issuer", "corp")]).await,
        1.0
    );
    assert_eq!(http.post_task_as("c", ALICE).await.status, 202);
    drop(idp);
}

/// The next `access_revoked` of `s`: its reason, and whether the stream then ended.
async fn revoked(s: &mut crate::support::sse::Events) -> Option<(String, bool)> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let e = s.next_event(left).await?;
        if e.event == "access_revoked" {
            let v: Value = serde_json::from_str(&e.data).expect("JSON data");
            let reason = v["reason"].as_str().expect("reason").to_owned();
            return Some((reason, s.until_end(Duration::from_secs(2)).await));
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_opened_with_a_key_the_provider_withdraws_ends_with_key_rotated() {
    let idp = Idp::start(free_port()).await;
    let (_keep, http) = gateway(&idp.issuer, |_| {}).await;
    keys_held(&http, "corp", OPS).await;
    let first = idp.token().await;
    let body = json!({ "input": good_input() });
    let r = http
        .post_json_as("/agents/c/tasks", &first, &body, &[])
        .await;
    assert_eq!(r.status, 202, "{r:?}");
    let task = r.json()["task_id"].as_str().expect("task_id").to_owned();
    let client: hyper_util::client::legacy::Client<_, http_body_util::Full<Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http();
    let req = hyper::Request::get(format!("{}/tasks/{task}/stream", http.base))
        .header("authorization", format!("Bearer {first}"))
        .header("accept", "text/event-stream")
        .body(http_body_util::Full::new(Bytes::new()))
        .expect("request");
    let res = client.request(req).await.expect("stream opens");
    assert_eq!(res.status(), 200);
    let mut stream = crate::support::sse::Events::new(res);
    // The provider publishes a new key and withdraws the old one; the new key's first token
    // makes the gateway fetch the set, where the stream's key is gone.
    idp.rotate().await;
    let second = idp.token().await;
    wait_for("the new key's tokens are accepted", || async {
        answered(&send_message(&http, &second).await)
    })
    .await;
    assert_eq!(
        revoked(&mut stream).await,
        Some(("key_rotated".into(), true)),
        "{:?}",
        stream.raw
    );
    assert!(!stream.raw.contains("retry:"), "no reconnect hint");
}

#[tokio::test(flavor = "multi_thread")]
async fn keys_are_fetched_again_every_jwks_refresh_secs_without_a_token_asking() {
    let idp = Idp::start(free_port()).await;
    let (_keep, http) = gateway(&idp.issuer, |cfg| {
        cfg.auth.oidc[0].jwks_refresh = Duration::from_secs(1);
    })
    .await;
    keys_held(&http, "corp", OPS).await;
    let old = idp.token().await;
    let body = json!({ "input": good_input() });
    let r = http.post_json_as("/agents/c/tasks", &old, &body, &[]).await;
    assert_eq!(r.status, 202, "{r:?}");
    // Its kid is held: presenting it asks for no fetch. The timer's fetch finds its key gone.
    idp.rotate().await;
    wait_for("the withdrawn key's token is refused", || async {
        http.post_json_as("/agents/c/tasks", &old, &body, &[])
            .await
            .status
            == 401
    })
    .await;
    let fetched = metric(
        &http,
        "a2a_gateway_jwks_fetches_total",
        &[("issuer", "corp"), ("outcome", "ok")],
    )
    .await;
    assert!(fetched >= 2.0, "{fetched}");
    let new = idp.token().await;
    let r = http.post_json_as("/agents/c/tasks", &new, &body, &[]).await;
    assert_eq!(r.status, 202, "held already, no fetch needed: {r:?}");
}

/// A SendMessage of `token` over every wire form, each refused as FORBIDDEN for the method
/// SendMessage before the agent is called: 1.0 JSON-RPC (HTTP 200, -32000) and HTTP+JSON
/// (403), 0.3 JSON-RPC (HTTP 200, -32000) and HTTP+JSON (403), gRPC (PERMISSION_DENIED).
async fn send_refused_everywhere(http: &Http, token: &str) {
    let v = rpc(
        http,
        "echo",
        Some(token),
        "SendMessage",
        message("hello", json!({})),
    )
    .await;
    assert_eq!(error_code(&v), -32000, "1.0 JSON-RPC: {v}");
    assert_forbidden("1.0 JSON-RPC", &v, "SendMessage");
    let r = rest(
        http,
        Method::POST,
        "/agents/echo/message:send",
        Some(token),
        Some(message("hello", json!({}))),
    )
    .await;
    assert_eq!(r.status, 403, "1.0 HTTP+JSON: {r:?}");
    let v = r.json();
    assert_eq!(v["error"]["status"], "PERMISSION_DENIED", "{v}");
    assert_forbidden("1.0 HTTP+JSON", &v, "SendMessage");
    let auth = format!("Bearer {token}");
    let h03 = [
        ("content-type", "application/json"),
        ("authorization", auth.as_str()),
    ];
    let (status, _, v) = raw(
        http,
        Method::POST,
        "/agents/echo/jsonrpc",
        &h03,
        &send_03(7),
    )
    .await;
    assert_eq!(status, 200, "0.3 JSON-RPC: {v}");
    assert_eq!((v["id"].clone(), error_code(&v)), (json!(7), -32000), "{v}");
    assert_eq!(
        v["error"]["data"],
        json!({"reason": "FORBIDDEN", "domain": "a2a-gateway", "method": "SendMessage"}),
        "0.3 JSON-RPC: {v}"
    );
    let rest03 = json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(),
        "role": "ROLE_USER", "content": [{"text": "hello"}]}});
    let (status, _, v) = raw(
        http,
        Method::POST,
        "/agents/echo/v1/message:send",
        &h03,
        &rest03.to_string(),
    )
    .await;
    assert_eq!(status, 403, "0.3 HTTP+JSON: {v}");
    assert_eq!(
        (v["data"]["reason"].clone(), v["data"]["method"].clone()),
        (json!("FORBIDDEN"), json!("SendMessage")),
        "0.3 HTTP+JSON: {v}"
    );
    let md = grpc::bearer(Some(token));
    let md: Vec<(&str, &str)> = md.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let a = grpc::call(&http.base, "SendMessage", &grpc_send(Some("echo")), &md).await;
    assert_eq!(
        (a.code, a.reason()),
        (7, "FORBIDDEN"),
        "gRPC: {:?}",
        a.status
    );
    assert_forbidden("gRPC", &a.status, "SendMessage");
}

/// The task ids of a 1.0 ListTasks answer.
fn listed(v: &Value) -> Vec<&str> {
    v["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("a listing: {v}"))
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_scope_reads_its_subjects_tasks_and_is_refused_sendmessage_on_every_wire_form() {
    let idp = Idp::start(free_port()).await;
    let (_keep, http) = gateway(&idp.issuer, |_| {}).await;
    keys_held(&http, "corp", OPS).await;
    // One subject (the provider's client, `orchestrator`), two tokens: one may send, one
    // may only read. Both carry the claims a2a_can ["tasks", "streams"], which count for
    // nothing.
    let sender = idp.token_for("a2a.send").await;
    let reader = idp.token_for("a2a.read").await;
    let v = rpc(
        &http,
        "echo",
        Some(&sender),
        "SendMessage",
        message("hello", json!({})),
    )
    .await;
    let task = v["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("the sample agent answers a task: {v}"))
        .to_owned();

    // The reader reads the task its subject created, on each binding, and lists it.
    let got = rpc(
        &http,
        "echo",
        Some(&reader),
        "GetTask",
        json!({ "id": task }),
    )
    .await;
    assert_eq!(got["result"]["id"], task.as_str(), "{got}");
    let r = rest(
        &http,
        Method::GET,
        &format!("/agents/echo/tasks/{task}"),
        Some(&reader),
        None,
    )
    .await;
    assert_eq!(
        (r.status, r.json()["id"].clone()),
        (200, json!(task)),
        "{r:?}"
    );
    let md = grpc::bearer(Some(&reader));
    let md: Vec<(&str, &str)> = md.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let a = grpc::call(
        &http.base,
        "GetTask",
        &json!({"tenant": "echo", "id": task}),
        &md,
    )
    .await;
    assert_eq!(
        (a.code, a.messages[0]["id"].clone()),
        (0, json!(task)),
        "{:?}",
        a.status
    );
    let v = rpc(&http, "echo", Some(&reader), "ListTasks", json!({})).await;
    assert_eq!(listed(&v), [task.as_str()], "{v}");
    // A method outside a2a.read's, though tasks is among its rights: refused.
    let v = rpc(
        &http,
        "echo",
        Some(&reader),
        "CancelTask",
        json!({ "id": task }),
    )
    .await;
    assert_forbidden("CancelTask", &v, "CancelTask");
    // SendMessage, over every wire form.
    send_refused_everywhere(&http, &reader).await;
    // Both scopes in one token: the union, so it sends.
    let both = idp.token_for("a2a.read+a2a.send").await;
    let v = rpc(
        &http,
        "echo",
        Some(&both),
        "SendMessage",
        message("hello", json!({})),
    )
    .await;
    assert!(v["result"]["task"]["id"].is_string(), "{v}");
    let v = rpc(&http, "echo", Some(&both), "ListTasks", json!({})).await;
    assert_eq!(listed(&v).len(), 2, "{v}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_without_a_mapped_scope_gets_nothing_whatever_its_claims() {
    let idp = Idp::start(free_port()).await;
    // Only a2a.read is mapped; the token asks for `a2a`, and carries the claims
    // a2a_agents ["*"] and a2a_can ["tasks", "streams"].
    let (_keep, http) = gateway(&idp.issuer, |cfg| {
        cfg.auth.oidc[0].scopes.retain(|s, _| s == "a2a.read");
    })
    .await;
    keys_held(&http, "corp", OPS).await;
    let token = idp.token().await;
    assert_eq!(claims(&token)["scope"], "a2a", "the token's scope");
    assert_eq!(claims(&token)["a2a_can"], json!(["tasks", "streams"]));
    // Verified (not 401), and may do nothing: no agent, no right, no method. Without the
    // `tasks` right a call is refused before its body is read (HTTP 403 on every binding).
    let r = send_message(&http, &token).await;
    assert_eq!(r.status, 403, "{r:?}");
    assert_eq!(error_code(&r.json()), -32000, "{r:?}");
    assert_eq!(reason(&r.json()), "FORBIDDEN", "{r:?}");
    let r = rest(&http, Method::GET, "/agents/echo/tasks", Some(&token), None).await;
    assert_eq!(r.status, 403, "{r:?}");
    let body = json!({ "input": good_input() });
    let r = http
        .post_json_as("/agents/c/tasks", &token, &body, &[])
        .await;
    assert_api_error(&r, 403, "FORBIDDEN");
    // The scope it lacked, asked for: granted.
    let reader = idp.token_for("a2a.read").await;
    let v = rpc(&http, "echo", Some(&reader), "ListTasks", json!({})).await;
    assert!(listed(&v).is_empty(), "{v}");
}

/// A reload that removes an issuer removes its `jwks_keys` series (a removed identity
/// provider holds no keys: the last value must not stay on the dashboard), and its tokens are
/// refused from then on; the issuer that stays keeps its series.
#[tokio::test(flavor = "multi_thread")]
async fn a_reload_that_removes_an_issuer_removes_its_key_gauge_and_its_tokens() {
    let idp = Idp::start(free_port()).await;
    let (keep, http) = gateway(&idp.issuer, |_| {}).await;
    keys_held(&http, "corp", OPS).await;
    let token = idp.token().await;
    assert!(answered(&send_message(&http, &token).await));
    let gw = keep[2]
        .downcast_ref::<a2a_gateway::Gateway>()
        .expect("the gateway");
    let mut next = (*gw.config()).clone();
    next.auth.oidc.clear();
    gw.reload(next).await.expect("reload applied");
    let text = String::from_utf8(http.get_as("/metrics", OPS).await.body.to_vec()).expect("utf8");
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("a2a_gateway_jwks_keys{") && l.contains("issuer=\"corp\"")),
        "the removed issuer's gauge is gone"
    );
    let r = send_message(&http, &token).await;
    assert_eq!(r.status, 401, "{r:?}");
}
