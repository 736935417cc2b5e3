//! The official A2A clients and streams with tokens from a real identity provider (node's
//! oidc-provider, `support::idp`): a2a-sdk's and @a2a-js/sdk's clients send with its tokens
//! through the gateway, follow its key rotation without a reload and report the withdrawn
//! key's token refused; a token's streams (a Clawpedia task stream, A2A's SendStreamingMessage
//! over JSON-RPC and SubscribeToTask over HTTP+JSON) end at its `exp` with `token_expired`.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Method;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use a2a_gateway::config::{AgentConfig, Config, OidcConfig, Right, ScopeRights};
use a2a_gateway::Gateway;
use a2a_sample_agent::{AgentOptions, SampleAgent};

use crate::a2a_gateway::{a2a_agent, card_url};
use crate::a2a_sdk::expected;
use crate::support::a2a_calls::{message, rpc, two_clients, OPS, WAIT};
use crate::support::a2a_sdk::{run_client_with, Sdk, HTTP_JSON, JSONRPC};
use crate::support::idp::{claims, header, keys_held, Idp, AUDIENCE};
use crate::support::sse::Events;
use crate::support::*;

/// How late after a token's `exp` its streams may end: the gateway looks four times a second.
const LATE_MS: i64 = 2000;

/// A gateway in front of an official A2A agent (`echo`, the sample agent) and a Clawpedia one
/// (`c`), taking the provider's tokens; the agents and the gateway, kept alive together.
struct Setup {
    _gw: Gateway,
    http: Http,
    echo: SampleAgent,
    clawpedia: SampleAgent,
}

async fn setup(issuer: &str) -> Setup {
    let echo = SampleAgent::start(AgentOptions::a2a("Echo"))
        .await
        .expect("sample agent starts");
    let clawpedia = agent().await;
    let mut cfg = Config::with_agents(
        "127.0.0.1:0".parse().expect("addr"),
        vec![
            a2a_agent("echo", &echo.base_url()),
            AgentConfig::new("c", &clawpedia.base_url()),
        ],
    );
    // Key clients besides: `ops` reads the metrics.
    two_clients(&mut cfg);
    let send = ScopeRights {
        can: vec![Right::Tasks, Right::Streams],
        ..ScopeRights::default()
    };
    cfg.auth.oidc = vec![OidcConfig {
        name: "corp".into(),
        issuer: issuer.into(),
        audience: AUDIENCE.into(),
        scopes: BTreeMap::from([("a2a".into(), send.clone()), ("a2a.short".into(), send)]),
        ..OidcConfig::default()
    }];
    // The tests poll as one token subject: its own rate is not what they measure.
    cfg.auth.token_rate_per_sec = 10_000.0;
    let gw = Gateway::start(cfg).await.expect("gateway starts");
    let http = Http::new(format!("http://{}", gw.addr()));
    http.ready().await;
    keys_held(&http, "corp", OPS).await;
    Setup {
        _gw: gw,
        http,
        echo,
        clawpedia,
    }
}

/// One client run: the SDK, the binding, the token of its calls, and the token its card is
/// fetched with.
type Send<'a> = (Sdk, &'static str, &'a str, &'a str);

/// Each SDK's client over each binding sending `hello` with `token`, its card fetched with
/// `card_token`.
fn sends<'a>(token: &'a str, card_token: &'a str) -> Vec<Send<'a>> {
    [Sdk::Python, Sdk::Js]
        .into_iter()
        .flat_map(|sdk| [JSONRPC, HTTP_JSON].map(|b| (sdk, b, token, card_token)))
        .collect()
}

/// Runs `runs` at once from the gateway's card of `echo` at `url`: their documents, in order.
fn run_sends(url: &str, runs: &[Send<'_>]) -> Vec<Value> {
    tokio::task::block_in_place(|| {
        std::thread::scope(|scope| {
            let handles: Vec<_> = runs
                .iter()
                .map(|&(sdk, binding, token, card_token)| {
                    scope.spawn(move || {
                        let extra = ["--card-token", card_token];
                        run_client_with(sdk, url, binding, Some(token), &extra, &["send-hello"])
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a client run"))
                .collect()
        })
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn both_sdk_clients_send_with_the_providers_tokens_and_follow_its_rotation_without_a_reload()
{
    let idp = Idp::start_anywhere().await;
    let s = setup(&idp.issuer).await;
    let url = card_url(&s.http, "echo");
    let first = idp.token().await;
    assert_eq!(header(&first)["typ"], "at+jwt", "an RFC 9068 access token");
    let runs = sends(&first, &first);
    for ((sdk, binding, _, _), out) in runs.iter().zip(run_sends(&url, &runs)) {
        assert_eq!(
            out["result"],
            expected("send-hello"),
            "{sdk:?} {binding} with the provider's token: {out}"
        );
    }
    let sent = |a: &SampleAgent| {
        a.requests()
            .iter()
            .filter(|r| String::from_utf8_lossy(&r.body).contains("\"hello\""))
            .count()
    };
    assert_eq!(sent(&s.echo), 4, "each client's message reached the agent");

    // The provider rotates: a new key published, the old one withdrawn. The SDK clients are
    // the first to present the new key's token: its kid unknown, the gateway fetches the keys
    // (no reload) and holds the request for the fetch, so the client is served, not refused.
    idp.rotate().await;
    let second = idp.token().await;
    assert_ne!(header(&second)["kid"], header(&first)["kid"]);
    let runs = sends(&second, &second);
    for ((sdk, binding, _, _), out) in runs.iter().zip(run_sends(&url, &runs)) {
        assert_eq!(
            out["result"],
            expected("send-hello"),
            "{sdk:?} {binding} with the new key's first token: {out}"
        );
    }
    let r = s.http.get_as("/metrics", OPS).await;
    let fetched = metric_value(
        &String::from_utf8_lossy(&r.body),
        "a2a_gateway_jwks_fetches_total",
        &[("issuer", "corp"), ("outcome", "ok")],
    );
    assert!(fetched >= 2.0, "the keys fetched again: {fetched}");
    // The withdrawn key's token is refused, the card aside (fetched with the new one): the
    // SDK's call itself meets the 401, and says so.
    let runs = sends(&first, &second);
    for ((sdk, binding, _, _), out) in runs.iter().zip(run_sends(&url, &runs)) {
        let text = out.to_string();
        assert!(
            out["error"].is_object() && !text.contains("TASK_STATE"),
            "{sdk:?} {binding}: an error, not a result: {out}"
        );
        assert!(
            !text.to_lowercase().contains("agent card"),
            "{sdk:?} {binding}: refused at the call, the card was fetched: {out}"
        );
        assert!(
            text.contains("401") || text.contains("UNAUTHORIZED"),
            "{sdk:?} {binding}: the 401 readable: {out}"
        );
    }
    assert_eq!(
        sent(&s.echo),
        4 + 4,
        "the old token's messages reached no agent"
    );
    // The old token is refused its card too.
    let r = s
        .http
        .get_as("/agents/echo/.well-known/agent-card.json", &first)
        .await;
    assert_eq!(r.status, 401, "{r:?}");
}

/// A stream opened on the gateway at `base` as `token`: `body` POSTed to `path` (a GET
/// without one).
async fn open(base: &str, path: &str, token: &str, body: Option<Value>) -> Events {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let req = hyper::Request::builder()
        .method(if body.is_some() {
            Method::POST
        } else {
            Method::GET
        })
        .uri(format!("{base}{path}"))
        .header("authorization", format!("Bearer {token}"))
        .header("accept", "text/event-stream")
        .header("a2a-version", "1.0")
        .header("content-type", "application/json");
    let body = body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string()));
    let res = client
        .request(req.body(Full::new(body)).expect("request"))
        .await
        .expect("the gateway answers");
    assert_eq!(res.status(), 200, "{path}: a stream");
    Events::new(res)
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// A short-lived token (scope `a2a.short`) and its `exp` in ms; it must live 4 s.
async fn short_token(idp: &Idp) -> (String, i64) {
    let token = idp.token_for("a2a.short").await;
    let c = claims(&token);
    let (iat, exp) = (
        c["iat"].as_i64().expect("iat"),
        c["exp"].as_i64().expect("exp"),
    );
    assert_eq!(exp - iat, 4, "a 4 s token: {c}");
    assert!(exp * 1000 > now_ms(), "not expired yet: {c}");
    (token, exp * 1000)
}

/// Read `s` until an event named `name` (any other skipped) within `wait`: its data as JSON
/// and when it came (ms), and whether the stream then ended.
async fn until(s: &mut Events, name: &str, wait: Duration) -> Option<(Value, i64, bool)> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let e = s.next_event(left).await?;
        if e.event == name {
            let at = now_ms();
            let data = serde_json::from_str(&e.data).expect("JSON data");
            let ended = s.until_end(Duration::from_secs(2)).await;
            return Some((data, at, ended));
        }
    }
}

/// `at` (ms) is at or after `exp` (ms), by at most [`LATE_MS`].
fn at_exp(what: &str, at: i64, exp: i64) {
    let late = at - exp;
    assert!(
        (0..LATE_MS).contains(&late),
        "{what} ended {late} ms after exp (not before, within {LATE_MS} ms)"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_short_lived_tokens_task_stream_ends_at_its_exp_with_token_expired() {
    let idp = Idp::start_anywhere().await;
    let s = setup(&idp.issuer).await;
    let (token, exp) = short_token(&idp).await;
    let r = s
        .http
        .post_json_as(
            "/agents/c/tasks",
            &token,
            &json!({ "input": good_input() }),
            &[],
        )
        .await;
    assert_eq!(r.status, 202, "{r:?}");
    let task = r.json()["task_id"].as_str().expect("task_id").to_owned();
    let mut stream = open(&s.http.base, &format!("/tasks/{task}/stream"), &token, None).await;
    wait_for("the task's upstream stream", || {
        let n = s.clawpedia.stream_connections(&task);
        async move { n >= 1 }
    })
    .await;
    // The stream carries the task's events before exp.
    s.clawpedia
        .push_event(&task, "log", r#"{"message":"before exp"}"#);
    let (data, at, ended) = until(&mut stream, "log", WAIT)
        .await
        .unwrap_or_else(|| panic!("the agent's event: {:?}", stream.raw));
    assert_eq!(data["message"], "before exp", "{data}");
    assert!(!ended, "still open: {:?}", stream.raw);
    assert!(at < exp, "relayed {} ms before exp", exp - at);
    let (data, at, ended) = until(&mut stream, "access_revoked", WAIT)
        .await
        .unwrap_or_else(|| panic!("access_revoked: {:?}", stream.raw));
    assert_eq!(data, json!({"reason": "token_expired"}), "{:?}", stream.raw);
    assert!(ended, "then the end: {:?}", stream.raw);
    at_exp("the task stream", at, exp);
    assert!(!stream.raw.contains("retry:"), "no reconnect hint");
}

/// The next StreamResponse of an A2A stream (`rpc`: the JSON-RPC id its responses carry).
async fn next_response(s: &mut Events, rpc: Option<i64>) -> Value {
    let e = s
        .next_event(WAIT)
        .await
        .unwrap_or_else(|| panic!("an event: {:?}", s.raw));
    assert_eq!(e.event, "message", "{:?}", s.raw);
    let v: Value = serde_json::from_str(&e.data).expect("JSON data");
    match rpc {
        Some(id) => {
            assert_eq!(v["id"], id, "{v}");
            v["result"].clone()
        }
        None => v,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_short_lived_tokens_a2a_streams_end_at_its_exp_with_access_revoked() {
    let idp = Idp::start_anywhere().await;
    let s = setup(&idp.issuer).await;
    let (token, exp) = short_token(&idp).await;
    let base = s.http.base.clone();
    // SendStreamingMessage over JSON-RPC: a task that stays WORKING.
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "SendStreamingMessage",
        "params": message("slow", json!({}))});
    let mut sent = open(&base, "/agents/echo/jsonrpc", &token, Some(body)).await;
    let first = next_response(&mut sent, Some(7)).await;
    let id = first["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task first: {first}"))
        .to_owned();
    let working = next_response(&mut sent, Some(7)).await;
    assert_eq!(
        working["statusUpdate"]["status"]["state"], "TASK_STATE_WORKING",
        "{working}"
    );
    // SubscribeToTask over HTTP+JSON: the task as it is now (WORKING) first.
    let path = format!("/agents/echo/tasks/{id}:subscribe");
    let mut sub = open(&base, &path, &token, Some(json!({}))).await;
    let first = next_response(&mut sub, None).await;
    assert_eq!(first["task"]["id"], id.as_str(), "the task first: {first}");
    assert_eq!(
        first["task"]["status"]["state"], "TASK_STATE_WORKING",
        "{first}"
    );
    assert!(now_ms() < exp, "both streams open before exp");
    // Both SDKs' clients follow the task too, on each binding, with the same token.
    let url = card_url(&s.http, "echo");
    let followers: Vec<_> = [Sdk::Python, Sdk::Js]
        .into_iter()
        .flat_map(|sdk| [JSONRPC, HTTP_JSON].map(|b| (sdk, b)))
        .map(|(sdk, binding)| {
            let (url, token, id) = (url.clone(), token.clone(), id.clone());
            std::thread::spawn(move || {
                let out = run_client_with(
                    sdk,
                    &url,
                    binding,
                    Some(&token),
                    &["--task", &id],
                    &["follow"],
                );
                (sdk, binding, out)
            })
        })
        .collect();

    // JSON-RPC: an error response to the stream's id, the gateway's -32000 with ErrorInfo
    // ACCESS_REVOKED and why.
    let (data, at, ended) = until(&mut sent, "error", WAIT)
        .await
        .unwrap_or_else(|| panic!("an error event: {:?}", sent.raw));
    assert!(ended, "then the end: {:?}", sent.raw);
    at_exp("SendStreamingMessage", at, exp);
    assert_eq!(data["id"], 7, "{data}");
    assert_eq!(data["error"]["code"], -32000, "{data}");
    let info = &data["error"]["data"][0];
    assert_eq!(info["reason"], "ACCESS_REVOKED", "{data}");
    assert_eq!(info["metadata"]["reason"], "token_expired", "{data}");
    // HTTP+JSON: a google.rpc.Status, PERMISSION_DENIED.
    let (data, at, ended) = until(&mut sub, "error", WAIT)
        .await
        .unwrap_or_else(|| panic!("an error event: {:?}", sub.raw));
    assert!(ended, "then the end: {:?}", sub.raw);
    at_exp("SubscribeToTask", at, exp);
    assert_eq!(data["error"]["code"], 403, "{data}");
    assert_eq!(data["error"]["status"], "PERMISSION_DENIED", "{data}");
    let info = &data["error"]["details"][0];
    assert_eq!(info["reason"], "ACCESS_REVOKED", "{data}");
    assert_eq!(info["metadata"]["reason"], "token_expired", "{data}");
    // Each SDK raised the ending as an error naming it and why.
    for f in followers {
        let (sdk, binding, out) = tokio::task::block_in_place(|| f.join().expect("a follower"));
        let err = &out["result"]["error"];
        assert!(
            err.is_object(),
            "{sdk:?} {binding}: an error, not a clean end: {out}"
        );
        for word in ["ACCESS_REVOKED", "token_expired"] {
            assert!(
                err.to_string().contains(word),
                "{sdk:?} {binding}: the error names {word}: {out}"
            );
        }
    }
    // The task itself lives on, its owner's: a new token of the same subject reads it.
    let fresh = idp.token().await;
    let t = rpc(
        &s.http,
        "echo",
        Some(&fresh),
        "GetTask",
        json!({ "id": id }),
    )
    .await;
    assert_eq!(t["result"]["status"]["state"], "TASK_STATE_WORKING", "{t}");
}
