//! No agent address reaches a client (issue 23, items 5 and 6): the URLs the gateway writes
//! start with `public_url`, or else with the scheme of its own listener and the request's `Host`
//! (never `X-Forwarded-*`, with `Vary: Host`); a file artifact's link and a content redirect on
//! the agent's origin become the gateway's content route, another path on that origin is 502,
//! another origin passes. And the scan: an agent that writes its own address into file
//! artifacts, redirects and error texts, read through every route the gateway serves, by a
//! client without `metrics` or `admin`: the address is in no body and no header.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::HeaderMap;
use hyper::{Method, Request, Response};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};

use a2a_gateway::config::{AgentConfig, Config, Right};
use sample::{NewArtifact, SampleAgent};

use crate::auth::client;
use crate::support::tls::{client_config, Ca, Files};
use crate::support::*;

const PEER: &str = "peer-key-0123456789abcdef";
const OPS: &str = "ops-key-0123456789abcdef";
const PUBLIC: &str = "https://gw.example.com";

// --- the agent: a sample agent behind a front of the test's own ---

/// What the front answers for one request instead of the sample agent.
#[derive(Clone)]
enum Canned {
    /// This status, headers and body; `{agent}` in them stands for the front's base URL.
    Answer(u16, Vec<(&'static str, String)>, String),
    /// The connection dropped without an answer.
    Close,
}

struct FrontState {
    /// `http://127.0.0.1:PORT` of the front: the agent's configured origin.
    base: String,
    /// The sample agent's own base URL, replaced by the front's in everything it answers.
    sample: String,
    canned: Mutex<HashMap<(String, String), Canned>>,
    client: Client<HttpConnector, Full<Bytes>>,
}

/// An agent the gateway reaches at the front's address: a sample agent (real tasks, streams,
/// artifacts) whose answers carry the front's address where they carried its own, with single
/// requests (method, path) answered as canned instead (redirects, error texts, a dropped
/// connection).
struct Front {
    sample: SampleAgent,
    state: Arc<FrontState>,
}

type Out = BoxBody<Bytes, hyper::Error>;

fn full(b: impl Into<Bytes>) -> Out {
    Full::new(b.into())
        .map_err(|n: Infallible| match n {})
        .boxed()
}

impl Front {
    async fn start() -> Front {
        let sample = agent().await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr: SocketAddr = listener.local_addr().expect("addr");
        let state = Arc::new(FrontState {
            base: format!("http://{addr}"),
            sample: sample.base_url(),
            canned: Mutex::default(),
            client: Client::builder(TokioExecutor::new()).build_http(),
        });
        let st = state.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let st = st.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| handle(st.clone(), req));
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await;
                });
            }
        });
        Front { sample, state }
    }

    fn base(&self) -> &str {
        &self.state.base
    }

    /// `host:port` of the front and of the sample agent: what no client may see.
    fn addresses(&self) -> [String; 2] {
        [&self.state.base, &self.state.sample].map(|u| u.trim_start_matches("http://").to_owned())
    }

    fn can(&self, method: &str, path: &str, c: Canned) {
        self.state
            .canned
            .lock()
            .expect("lock")
            .insert((method.to_owned(), path.to_owned()), c);
    }

    fn answer(
        &self,
        method: &str,
        path: &str,
        status: u16,
        headers: &[(&'static str, &str)],
        body: &str,
    ) {
        let headers = headers.iter().map(|(k, v)| (*k, v.to_string())).collect();
        self.can(
            method,
            path,
            Canned::Answer(status, headers, body.to_owned()),
        );
    }

    fn uncan(&self, method: &str, path: &str) {
        self.state
            .canned
            .lock()
            .expect("lock")
            .remove(&(method.to_owned(), path.to_owned()));
    }
}

async fn handle(
    st: Arc<FrontState>,
    req: Request<Incoming>,
) -> Result<Response<Out>, std::io::Error> {
    let key = (req.method().to_string(), req.uri().path().to_owned());
    let canned = st.canned.lock().expect("lock").get(&key).cloned();
    match canned {
        Some(Canned::Close) => return Err(std::io::Error::other("dropped on purpose")),
        Some(Canned::Answer(status, headers, body)) => {
            let mut res = Response::new(full(body.replace("{agent}", &st.base)));
            *res.status_mut() = hyper::StatusCode::from_u16(status).expect("status");
            for (k, v) in headers {
                res.headers_mut().insert(
                    k,
                    // Bytes as given: a test may write obs-text (not ASCII) on purpose.
                    hyper::header::HeaderValue::from_bytes(
                        v.replace("{agent}", &st.base).as_bytes(),
                    )
                    .expect("header value"),
                );
            }
            return Ok(res);
        }
        None => {}
    }
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map_err(std::io::Error::other)?
        .to_bytes();
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut up = Request::builder()
        .method(parts.method.clone())
        .uri(format!("{}{target}", st.sample));
    for (k, v) in &parts.headers {
        if !matches!(
            k.as_str(),
            "host" | "content-length" | "connection" | "transfer-encoding"
        ) {
            up = up.header(k, v);
        }
    }
    let res = st
        .client
        .request(up.body(Full::new(body)).expect("request"))
        .await
        .map_err(std::io::Error::other)?;
    let (mut parts, body) = res.into_parts();
    let stream = parts
        .headers
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if stream {
        return Ok(Response::from_parts(parts, body.boxed()));
    }
    let body = body
        .collect()
        .await
        .map_err(std::io::Error::other)?
        .to_bytes();
    let body = match std::str::from_utf8(&body) {
        Ok(s) => Bytes::from(s.replace(&st.sample, &st.base)),
        Err(_) => body,
    };
    if let Some(l) = parts.headers.get("location").and_then(|v| v.to_str().ok()) {
        let l = l.replace(&st.sample, &st.base);
        parts
            .headers
            .insert("location", l.parse().expect("location"));
    }
    parts.headers.remove("content-length");
    Ok(Response::from_parts(parts, full(body)))
}

// --- helpers ---

/// A gateway in front of `front` as agent `a`, with `tweak` applied; ready.
async fn gateway(front: &Front, tweak: impl FnOnce(&mut Config)) -> TestGateway {
    let base = front.base().to_owned();
    let g = TestGateway::start(&[], move |cfg| {
        cfg.agents = vec![AgentConfig::new("a", &base)];
        tweak(cfg);
    })
    .await;
    g.ready().await;
    g
}

/// peer: every agent, tasks, streams and events, neither metrics nor admin. ops: everything.
fn clients(cfg: &mut Config) {
    use Right::*;
    cfg.clients = vec![
        client("peer", PEER, &["*"], &[Tasks, Streams, Events]),
        client(
            "ops",
            OPS,
            &["*"],
            &[Tasks, Streams, Events, AllTasks, Metrics, Admin],
        ),
    ];
}

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A conformant `file` artifact of `task` whose `content` is `content`.
fn file(task: &str, id: &str, content: &str) -> Value {
    json!({
        "artifact_id": id,
        "task_id": task,
        "type": "file",
        "content": content,
        "metadata": {
            "created_at": "2026-01-01T00:00:00.000Z",
            "filename": format!("{id}.bin"),
            "mime_type": "application/octet-stream",
        },
    })
}

/// The `content` of each artifact of a list answer, by id.
fn contents(r: &Resp) -> HashMap<String, String> {
    assert_eq!(r.status, 200, "{r:?}");
    r.json()["artifacts"]
        .as_array()
        .expect("artifacts")
        .iter()
        .map(|a| {
            (
                a["artifact_id"].as_str().expect("id").to_owned(),
                a["content"].as_str().expect("content").to_owned(),
            )
        })
        .collect()
}

fn varies_on_host(headers: &HeaderMap) -> bool {
    headers
        .get_all("vary")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|v| v.trim().eq_ignore_ascii_case("host"))
}

// --- item 6: file links ---

/// With `public_url`, a file artifact whose `content` is on the agent's origin (the sample's
/// own link, another path there) is listed as `{public_url}/agents/a/artifacts/{id}/content`
/// on both list routes, and that link serves the file; links on other origins (a presigned
/// URL, the same host on another port) are listed unchanged. On today's main the list carried
/// `http://127.0.0.1:PORT/artifacts/{id}/content`.
#[tokio::test]
async fn file_links_on_the_agents_origin_become_the_gateways_content_route() {
    let front = Front::start().await;
    let g = gateway(&front, |cfg| cfg.public_url = Some(PUBLIC.into())).await;
    let id = g.create_task("a").await;
    let body = Bytes::from_static(b"print('hello')\n");
    let own = front.sample.add_artifact(
        &id,
        NewArtifact::File {
            filename: "hello.py".into(),
            mime_type: "text/x-python".into(),
            body: body.clone(),
        },
    );
    let listed = g.http.get(&format!("/tasks/{id}/artifacts")).await;
    let want = format!("{PUBLIC}/agents/a/artifacts/{own}/content");
    assert_eq!(contents(&listed).get(&own), Some(&want), "{listed:?}");
    assert!(
        !varies_on_host(&listed.headers),
        "public_url does not vary: {listed:?}"
    );
    let link = want.strip_prefix(PUBLIC).expect("the gateway's path");
    let served = g.http.get(link).await;
    assert_eq!(
        (served.status, &served.body[..]),
        (200, &body[..]),
        "{served:?}"
    );
    assert_eq!(served.header("content-type"), Some("text/x-python"));

    // A list the agent writes itself: links on its origin and elsewhere.
    let other = g.create_task("a").await;
    let (on, path, presigned, port) = (new_id(), new_id(), new_id(), new_id());
    let signed = "https://storage.example.net/bucket/o.bin?X-Amz-Signature=abc&X-Amz-Expires=60";
    let other_port = "http://127.0.0.1:1/artifacts/x/content";
    let list = json!({ "artifacts": [
        file(&other, &on, &format!("{{agent}}/artifacts/{on}/content")),
        file(&other, &path, "{agent}/files/report.bin?v=2"),
        file(&other, &presigned, signed),
        file(&other, &port, other_port),
        { "artifact_id": new_id(), "task_id": other, "type": "text", "content": "plain text",
          "metadata": { "created_at": "2026-01-01T00:00:00.000Z" } },
    ]});
    front.answer(
        "GET",
        &format!("/tasks/{other}/artifacts"),
        200,
        &[("content-type", "application/json")],
        &list.to_string(),
    );
    for route in [
        format!("/tasks/{other}/artifacts"),
        format!("/agents/a/tasks/{other}/artifacts"),
    ] {
        let r = g.http.get(&route).await;
        let c = contents(&r);
        for id in [&on, &path] {
            assert_eq!(
                c[id.as_str()],
                format!("{PUBLIC}/agents/a/artifacts/{id}/content"),
                "{route}: {r:?}"
            );
        }
        assert_eq!(c[&presigned], signed, "{route}");
        assert_eq!(c[&port], other_port, "{route}");
        let text = String::from_utf8_lossy(&r.body);
        for addr in front.addresses() {
            assert!(!text.contains(&addr), "{route} names the agent: {text}");
        }
        // Everything else of the list is the agent's.
        let got = r.json();
        assert_eq!(
            got["artifacts"][0]["metadata"],
            list["artifacts"][0]["metadata"]
        );
        assert_eq!(got["artifacts"][4], list["artifacts"][4]);
    }
}

// --- item 5: public_url, else Host and the listener's scheme ---

/// Without `public_url`, a link takes the request's `Host` (HTTP/1.1) or `:authority` (HTTP/2)
/// and `http`, whatever `X-Forwarded-Host`/`-Proto` say, and the answer carries `Vary: Host`;
/// over TLS the scheme is `https`. On today's main the link was the agent's own URL.
#[tokio::test]
async fn without_public_url_links_follow_host_and_the_listener_never_x_forwarded() {
    let front = Front::start().await;
    let g = gateway(&front, |_| {}).await;
    let id = g.create_task("a").await;
    let art = front.sample.add_artifact(
        &id,
        NewArtifact::File {
            filename: "f.bin".into(),
            mime_type: "application/octet-stream".into(),
            body: Bytes::from_static(b"0123"),
        },
    );
    let path = format!("/tasks/{id}/artifacts");
    let r = g
        .http
        .send(
            Method::GET,
            &path,
            &[
                ("host", "gw.internal:8443"),
                ("x-forwarded-host", "evil.example"),
                ("x-forwarded-proto", "https"),
                ("forwarded", "host=evil.example;proto=https"),
            ],
            Bytes::new(),
        )
        .await;
    assert_eq!(
        contents(&r)[&art],
        format!("http://gw.internal:8443/agents/a/artifacts/{art}/content"),
        "{r:?}"
    );
    assert!(varies_on_host(&r.headers), "no Vary: Host: {r:?}");
    // The client's own Host (the gateway's address), over HTTP/1.1 and HTTP/2.
    let own = format!("http://{}/agents/a/artifacts/{art}/content", g.gw.addr());
    let r = g.http.get(&path).await;
    assert_eq!(contents(&r)[&art], own, "{r:?}");
    let h2: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let res = h2
        .request(
            Request::get(format!("{}{path}", g.http.base))
                .body(Full::new(Bytes::new()))
                .expect("request"),
        )
        .await
        .expect("h2");
    assert_eq!(res.version(), hyper::Version::HTTP_2);
    let vary = varies_on_host(res.headers());
    let body: Value =
        serde_json::from_slice(&res.into_body().collect().await.expect("body").to_bytes())
            .expect("json");
    assert_eq!(body["artifacts"][0]["content"], own.as_str(), "h2: {body}");
    assert!(vary, "h2: no Vary: Host");

    // Over TLS: https, the same Host rules.
    let ca = Ca::new("test CA");
    let files = Files::new();
    let base = front.base().to_owned();
    let mut tg = TestGateway::start(&[], |cfg| {
        cfg.agents = vec![AgentConfig::new("a", &base)];
        cfg.tls = Some(files.tls("server", &ca.server(), None));
    })
    .await;
    tg.http = Http::tls(
        format!("https://{}", tg.gw.addr()),
        client_config(&ca, None, &[b"http/1.1"]),
    );
    tg.ready().await;
    let tid = tg.create_task("a").await;
    let tart = front.sample.add_artifact(
        &tid,
        NewArtifact::File {
            filename: "t.bin".into(),
            mime_type: "application/octet-stream".into(),
            body: Bytes::from_static(b"tls"),
        },
    );
    let r = tg
        .http
        .send(
            Method::GET,
            &format!("/tasks/{tid}/artifacts"),
            &[("host", "gw.internal"), ("x-forwarded-proto", "http")],
            Bytes::new(),
        )
        .await;
    assert_eq!(
        contents(&r)[&tart],
        format!("https://gw.internal/agents/a/artifacts/{tart}/content"),
        "{r:?}"
    );
    assert!(varies_on_host(&r.headers), "{r:?}");
}

// --- item 6: redirects ---

/// A redirect from the agent's content route: to its own `/artifacts/{id}/content` (absolute
/// or relative, query kept) it becomes `{public_url}/agents/a/artifacts/{id}/content`, on both
/// content routes; to any other path on its origin (its `/downloads/`, another artifact's
/// content) it is 502 AGENT_PROTOCOL_VIOLATION naming no address; to another origin it passes
/// unchanged. On today's main every `Location` passed as the agent wrote it.
#[tokio::test]
async fn content_redirects_on_the_agents_origin_are_rewritten_or_refused() {
    let front = Front::start().await;
    let g = gateway(&front, |cfg| cfg.public_url = Some(PUBLIC.into())).await;
    let task = g.create_task("a").await;
    let ids: Vec<String> = (0..7).map(|_| new_id()).collect();
    let list = json!({ "artifacts": ids
        .iter()
        .map(|i| file(&task, i, &format!("{{agent}}/artifacts/{i}/content")))
        .collect::<Vec<_>>() });
    front.answer(
        "GET",
        &format!("/tasks/{task}/artifacts"),
        200,
        &[("content-type", "application/json")],
        &list.to_string(),
    );
    assert_eq!(
        g.http.get(&format!("/tasks/{task}/artifacts")).await.status,
        200
    );
    let gateway_link = |i: &str, q: &str| format!("{PUBLIC}/agents/a/artifacts/{i}/content{q}");
    let signed = "https://storage.example.net/b/o.bin?sig=1";
    let other_port = format!("http://127.0.0.1:1/artifacts/{}/content", ids[6]);
    // (status, Location the agent writes, what the client gets: Some(Location) or None for 502)
    let cases: Vec<(u16, String, Option<String>)> = vec![
        (
            302,
            format!("{{agent}}/artifacts/{}/content?sig=abc&exp=60", ids[0]),
            Some(gateway_link(&ids[0], "?sig=abc&exp=60")),
        ),
        (
            307,
            format!("/artifacts/{}/content", ids[1]),
            Some(gateway_link(&ids[1], "")),
        ),
        (302, format!("{{agent}}/downloads/{}", ids[2]), None),
        (301, "/elsewhere?x=1".into(), None),
        (302, format!("{{agent}}/artifacts/{}/content", ids[0]), None),
        (303, signed.into(), Some(signed.into())),
        (302, other_port.clone(), Some(other_port)),
    ];
    for (i, (status, location, want)) in cases.iter().enumerate() {
        let id = &ids[i];
        front.answer(
            "GET",
            &format!("/artifacts/{id}/content"),
            *status,
            &[("location", location)],
            "",
        );
        for route in [
            format!("/agents/a/artifacts/{id}/content"),
            format!("/artifacts/{id}/content"),
        ] {
            let r = g.http.get(&route).await;
            match want {
                Some(to) => {
                    assert_eq!(r.status, *status, "{route} ({location}): {r:?}");
                    assert_eq!(r.header("location"), Some(to.as_str()), "{route}: {r:?}");
                }
                None => {
                    let e = assert_api_error(&r, 502, "AGENT_PROTOCOL_VIOLATION");
                    for addr in front.addresses() {
                        assert!(!e.to_string().contains(&addr), "{route}: {e}");
                    }
                }
            }
        }
    }
}

/// Other spellings of the agent's origin are still the agent's origin: a scheme-relative
/// `//host:port/...` (resolved against the agent's answer, it is the agent), an upper-case
/// scheme, userinfo before the host, a URL that is not ASCII or has a space (which `http::Uri`
/// does not parse; in a `Location` the former is obs-text). In a file's `content` each becomes
/// the gateway's link; in a redirect's `Location` (to the agent's `/downloads/`) each is 502,
/// never passed with the agent's address in it. On today's main all of them passed unchanged.
#[tokio::test]
async fn other_spellings_of_the_agents_origin_are_caught() {
    let front = Front::start().await;
    let g = gateway(&front, |cfg| cfg.public_url = Some(PUBLIC.into())).await;
    let [addr, _] = front.addresses();
    let task = g.create_task("a").await;
    let spellings = |id: &str, path: &str| {
        vec![
            format!("//{addr}{path}"),
            format!("HTTP://{}{path}", addr.to_ascii_uppercase()),
            format!("http://someone@{addr}{path}"),
            // What http::Uri does not parse: not ASCII, a space.
            format!("http://{addr}{path}/r\u{e9}sum\u{e9}.pdf"),
            format!("http://{addr}{path}/a b.pdf"),
        ]
        .into_iter()
        .map(|u| (new_id(), u.replace("{id}", id)))
        .collect::<Vec<_>>()
    };
    let files = spellings("x", "/artifacts/x/content");
    let list = json!({ "artifacts": files
        .iter()
        .map(|(i, u)| file(&task, i, u))
        .collect::<Vec<_>>() });
    front.answer(
        "GET",
        &format!("/tasks/{task}/artifacts"),
        200,
        &[("content-type", "application/json")],
        &list.to_string(),
    );
    let r = g.http.get(&format!("/tasks/{task}/artifacts")).await;
    let c = contents(&r);
    let mut leaks = Vec::new();
    for (id, written) in &files {
        let got = &c[id.as_str()];
        if got != &format!("{PUBLIC}/agents/a/artifacts/{id}/content") {
            leaks.push(format!("file content {written:?} listed as {got:?}"));
        }
    }
    for (id, location) in spellings("{id}", "/downloads/{id}")
        .into_iter()
        .map(|(id, l)| (id.clone(), l.replace("{id}", &id)))
    {
        front.answer(
            "GET",
            &format!("/artifacts/{id}/content"),
            302,
            &[("location", &location)],
            "",
        );
        let r = g
            .http
            .get(&format!("/agents/a/artifacts/{id}/content"))
            .await;
        if r.status != 502 {
            let shown = r
                .headers
                .get("location")
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
            leaks.push(format!(
                "Location {location:?} answered {} with Location {shown:?}",
                r.status
            ));
        }
    }
    assert!(
        leaks.is_empty(),
        "the agent's origin passed:\n{}",
        leaks.join("\n")
    );
}

// --- the scan ---

/// One answer the scan read: what was asked, and everything that came back.
struct Seen {
    what: String,
    status: u16,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Seen {
    fn of(what: impl Into<String>, r: Resp) -> Seen {
        Seen {
            what: what.into(),
            status: r.status,
            headers: r.headers,
            body: r.body.to_vec(),
        }
    }
}

/// A stream's head and what it carried while `during` ran (at most `for_`).
async fn read_stream(
    base: &str,
    path: &str,
    key: &str,
    for_: Duration,
    during: impl std::future::Future<Output = ()>,
) -> Seen {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let req = Request::get(format!("{base}{path}"))
        .header("authorization", format!("Bearer {key}"))
        .header("accept", "text/event-stream")
        .body(Full::new(Bytes::new()))
        .expect("request");
    let res = tokio::time::timeout(Duration::from_secs(10), client.request(req))
        .await
        .expect("head in time")
        .expect("stream request");
    let status = res.status().as_u16();
    let (parts, mut body) = res.into_parts();
    let mut got = Vec::new();
    let deadline = Instant::now() + for_;
    let read = async {
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(d) = frame.into_data() {
                got.extend_from_slice(&d);
            }
        }
    };
    // Read until `during` is done (and a moment more for what it caused), or `for_` passed.
    let _ = tokio::time::timeout_at(deadline.into(), async {
        tokio::select! {
            _ = read => {}
            _ = async {
                during.await;
                tokio::time::sleep(Duration::from_millis(300)).await;
            } => {}
        }
    })
    .await;
    Seen {
        what: format!("stream {path}"),
        status,
        headers: parts.headers,
        body: got,
    }
}

/// Issue 23's scan: the agent puts its own address into file artifacts (its own links and a
/// list of its own), redirects (to its content route, to its downloads) and error texts (an
/// error body on every task route, on the content route, on the stream, on create; a dropped
/// connection), and a client without `metrics`/`admin` reads every route the gateway serves,
/// in both forms where there are two: card, create, get, cancel, artifacts, content, stream,
/// `/events`, `/agents`, `/api/fleet`, the probes. No body and no header names the agent's
/// address (nor the sample's behind it), while the agent's own answers, asked directly, do. On
/// today's main the artifact lists and the redirects carried the address.
#[tokio::test]
async fn no_route_shows_a_client_the_agents_address() {
    let front = Front::start().await;
    let g = gateway(&front, |cfg| {
        clients(cfg);
        // The error answers below must not eject the agent midway.
        cfg.agents[0].eject_after = 0;
    })
    .await;
    let addrs = front.addresses();
    let mut seen: Vec<Seen> = Vec::new();
    let get = |path: String| {
        let g = &g;
        async move { Seen::of(format!("GET {path}"), g.http.get_as(&path, PEER).await) }
    };
    let input = json!({ "input": good_input() });
    let post = |path: String, body: Value| {
        let g = &g;
        async move {
            Seen::of(
                format!("POST {path}"),
                g.http.post_json_as(&path, PEER, &body, &[]).await,
            )
        }
    };

    // /events open from the start, carrying every change the scan causes.
    let (events_tx, events_rx) = tokio::sync::oneshot::channel::<()>();
    let events = tokio::spawn({
        let base = g.http.base.clone();
        async move {
            read_stream(&base, "/events", PEER, Duration::from_secs(60), async {
                let _ = events_rx.await;
            })
            .await
        }
    });

    // Tasks, and the artifacts the agent links to itself.
    let created = post("/agents/a/tasks".into(), input.clone()).await;
    let task = serde_json::from_slice::<Value>(&created.body).expect("json")["task_id"]
        .as_str()
        .expect("task_id")
        .to_owned();
    seen.push(created);
    let c = post(
        "/tasks".into(),
        json!({ "agent": "a", "input": good_input() }),
    )
    .await;
    assert_eq!(c.status, 202, "agent-less create");
    let broken = serde_json::from_slice::<Value>(&c.body).expect("json")["task_id"]
        .as_str()
        .expect("task_id")
        .to_owned();
    seen.push(c);
    let dropped = {
        let c = post("/agents/a/tasks".into(), input.clone()).await;
        let id = serde_json::from_slice::<Value>(&c.body).expect("json")["task_id"]
            .as_str()
            .expect("task_id")
            .to_owned();
        seen.push(c);
        id
    };
    let file_art = front.sample.add_artifact(
        &task,
        NewArtifact::File {
            filename: "out.csv".into(),
            mime_type: "text/csv".into(),
            body: Bytes::from_static(b"a,b\n1,2\n"),
        },
    );
    let downloads = front.sample.add_artifact(
        &task,
        NewArtifact::Redirect {
            filename: "report.pdf".into(),
            mime_type: "application/pdf".into(),
            body: Bytes::from_static(b"%PDF-1.7"),
        },
    );
    let text_art = front
        .sample
        .add_artifact(&task, NewArtifact::Text("done".into()));
    // A list of the agent's own on the second task: a link on its origin that redirects to
    // its content route with a signature, another that answers an error text.
    let (redirected, failing) = (new_id(), new_id());
    front.answer(
        "GET",
        &format!("/tasks/{broken}/artifacts"),
        200,
        &[("content-type", "application/json")],
        &json!({ "artifacts": [
            file(&broken, &redirected, &format!("{{agent}}/artifacts/{redirected}/content")),
            file(&broken, &failing, "{agent}/blobs/failing"),
        ]})
        .to_string(),
    );
    front.answer(
        "GET",
        &format!("/artifacts/{redirected}/content"),
        302,
        &[(
            "location",
            &format!("{{agent}}/artifacts/{redirected}/content?sig=1"),
        )],
        "",
    );
    let error = |what: &str| {
        let message = format!("{what} failed at {{agent}}/internal/{what} (see {{agent}}/debug)");
        json!({ "error": { "code": "INTERNAL", "message": message } }).to_string()
    };
    let json_ct: &[(&'static str, &str)] = &[("content-type", "application/json")];
    front.answer(
        "GET",
        &format!("/artifacts/{failing}/content"),
        500,
        json_ct,
        &error("content"),
    );

    // The catalog, the card, the fleet, the probes.
    for path in [
        "/agents",
        "/api/fleet",
        "/agents/a/agent-card.json",
        "/healthz",
        "/readyz",
    ] {
        seen.push(get(path.into()).await);
    }
    // Every read of the task, in both forms.
    for prefix in ["", "/agents/a"] {
        seen.push(get(format!("{prefix}/tasks/{task}")).await);
        seen.push(get(format!("{prefix}/tasks/{task}/artifacts")).await);
        seen.push(get(format!("{prefix}/tasks/{broken}/artifacts")).await);
        for art in [&file_art, &downloads, &text_art, &redirected, &failing] {
            seen.push(get(format!("{prefix}/artifacts/{art}/content")).await);
        }
    }
    // Its streams, in both forms, with events while they are open.
    for prefix in ["", "/agents/a"] {
        let path = format!("{prefix}/tasks/{task}/stream");
        let sample = &front.sample;
        let (t, fa) = (task.clone(), file_art.clone());
        let push = async move {
            wait_for("the agent's stream", || {
                let open = sample.stream_connections(&t);
                async move { open >= 1 }
            })
            .await;
            sample.push_event(
                &t,
                "log",
                r#"{"timestamp":"2026-01-01T00:00:00.000Z","level":"INFO","message":"working"}"#,
            );
            sample.push_event(
                &t,
                "artifact.update",
                &json!({ "artifact_id": fa }).to_string(),
            );
        };
        seen.push(read_stream(&g.http.base, &path, PEER, Duration::from_millis(1500), push).await);
    }
    // A change /events carries.
    moved(&front.sample, &task, "WORKING");
    seen.push(get(format!("/tasks/{task}")).await);

    // Error texts on every task route of the second task, then a dropped connection.
    for (method, path) in [
        ("GET", format!("/tasks/{broken}")),
        ("POST", format!("/tasks/{broken}/cancel")),
        ("GET", format!("/tasks/{broken}/stream")),
    ] {
        front.answer(method, &path, 500, json_ct, &error(&path));
    }
    front.answer(
        "GET",
        &format!("/tasks/{task}/artifacts"),
        503,
        &[("content-type", "text/plain")],
        "artifact store at {agent}/store unreachable",
    );
    front.answer("POST", "/tasks", 500, json_ct, &error("create"));
    for prefix in ["", "/agents/a"] {
        seen.push(get(format!("{prefix}/tasks/{broken}")).await);
        seen.push(get(format!("{prefix}/tasks/{task}/artifacts")).await);
        let path = format!("{prefix}/tasks/{broken}/stream");
        let wait = tokio::time::sleep(Duration::from_millis(500));
        seen.push(read_stream(&g.http.base, &path, PEER, Duration::from_secs(2), wait).await);
    }
    seen.push(post("/agents/a/tasks".into(), input.clone()).await);
    seen.push(
        post(
            "/tasks".into(),
            json!({ "agent": "a", "input": good_input() }),
        )
        .await,
    );
    seen.push(post(format!("/tasks/{broken}/cancel"), Value::Null).await);
    seen.push(post(format!("/agents/a/tasks/{broken}/cancel"), Value::Null).await);
    front.can("GET", &format!("/tasks/{dropped}"), Canned::Close);
    front.can("POST", &format!("/tasks/{dropped}/cancel"), Canned::Close);
    for prefix in ["", "/agents/a"] {
        seen.push(get(format!("{prefix}/tasks/{dropped}")).await);
        seen.push(post(format!("{prefix}/tasks/{dropped}/cancel"), Value::Null).await);
    }
    front.uncan("POST", "/tasks");
    // The catalog and the fleet again, after the failures.
    seen.push(get("/agents".into()).await);
    seen.push(get("/api/fleet".into()).await);
    seen.push(get("/agents/a/agent-card.json".into()).await);
    let _ = events_tx.send(());
    seen.push(events.await.expect("the /events reader"));

    // The scan reached what it meant to: answers of every kind, with the agent's error
    // answers among them.
    assert!(seen.len() > 40, "{} answers", seen.len());
    assert!(seen.iter().any(|s| s.status == 302), "a redirect was read");
    assert!(seen.iter().any(|s| s.status >= 500), "an error was read");
    for prefix in ["", "/agents/a"] {
        let what = format!("stream {prefix}/tasks/{task}/stream");
        let s = seen
            .iter()
            .find(|s| s.what == what)
            .expect("the stream was read");
        let body = String::from_utf8_lossy(&s.body);
        assert!(
            s.status == 200 && body.contains("working") && body.contains("artifact.update"),
            "{what} carried the agent's events: {} {body}",
            s.status
        );
    }
    let events_body = String::from_utf8_lossy(&seen.last().expect("events").body).into_owned();
    assert!(
        events_body.contains(&task),
        "/events carried the scan's changes: {events_body}"
    );

    // What the scan looks for is there to be found: the agent's own answers carry it.
    let direct = Http::new(front.base().to_owned());
    for path in [
        format!("/tasks/{broken}"),
        format!("/tasks/{task}/artifacts"),
    ] {
        let r = direct.get(&path).await;
        assert!(
            String::from_utf8_lossy(&r.body).contains(&addrs[0]),
            "the agent's {path} does not name it: {r:?}"
        );
    }

    // A client with `metrics` still reads the agent's error texts.
    let r = g.http.get_as(&format!("/tasks/{broken}"), OPS).await;
    assert!(
        String::from_utf8_lossy(&r.body).contains(&addrs[0]),
        "ops reads the agent's error text: {r:?}"
    );

    let mut leaks = Vec::new();
    for s in &seen {
        let body = String::from_utf8_lossy(&s.body);
        for addr in &addrs {
            if body.contains(addr.as_str()) {
                leaks.push(format!("{} ({}): body: {body}", s.what, s.status));
            }
            for (k, v) in &s.headers {
                if String::from_utf8_lossy(v.as_bytes()).contains(addr.as_str()) {
                    leaks.push(format!("{} ({}): header {k}: {v:?}", s.what, s.status));
                }
            }
        }
    }
    assert!(
        leaks.is_empty(),
        "the agent's address ({addrs:?}) reached a client without metrics/admin:\n{}",
        leaks.join("\n")
    );
}
