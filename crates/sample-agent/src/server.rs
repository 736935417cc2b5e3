//! The HTTP side: accept loop (hyper-util auto builder, HTTP/1 keep-alive and h2c, TCP_NODELAY),
//! routing, scripted replies, and the spec's correct answers. No logging on the request path.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::{Body, Incoming};
use hyper::header::{
    HeaderMap, HeaderValue, CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH, LOCATION,
};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use super::body::{EventBody, OutBody};
use super::shared::{lock, Shared};
use super::state::{Cancel, Content, Opened};
use super::{a2a_bindings, official, progress, Recorded, Reply, Route};

/// Largest request body read; larger ones get 413 (a test agent has no use for more).
pub(crate) const MAX_BODY: usize = 8 * 1024 * 1024;

/// The service's error: hyper then drops the connection without answering (`Reply::Close`,
/// `Reply::Hang` at shutdown, a broken request body).
#[derive(Debug)]
pub(crate) struct Dropped;

impl fmt::Display for Dropped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("connection dropped by the sample agent")
    }
}

impl std::error::Error for Dropped {}

/// Serves until the agent stops, then drops every live connection before returning.
pub(crate) async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut builder = Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).keep_alive(true);
    builder.http2().timer(TokioTimer::new());
    let builder = Arc::new(builder);
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = shared.stopped() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => {
                    let _ = tcp.set_nodelay(true);
                    let builder = builder.clone();
                    let shared = shared.clone();
                    conns.spawn(async move {
                        let svc = service_fn(move |req| handle(shared.clone(), req));
                        let _ = builder.serve_connection(TokioIo::new(tcp), svc).await;
                    });
                }
                // Out of descriptors and the like: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
        }
    }
    drop(listener);
    conns.shutdown().await;
}

/// Which route a request is, and the id in its path (for an A2A agent: its binding's route,
/// the path after its base).
fn classify(
    protocol: crate::Protocol,
    card_path: &str,
    method: &Method,
    path: &str,
) -> (Route, String) {
    let get = method == Method::GET;
    if path == card_path && (get || method == Method::HEAD) {
        return (Route::Card, String::new());
    }
    if matches!(protocol, crate::Protocol::A2a | crate::Protocol::A2aV0_3) {
        if path == official::JSONRPC_PATH && method == Method::POST {
            return (Route::A2aJsonRpc, String::new());
        }
        if let Some(name) = path.strip_prefix(a2a_grpc::SERVICE_PATH) {
            if method == Method::POST {
                return (Route::A2aGrpc, name.to_owned());
            }
        }
        return match path.strip_prefix(official::REST_BASE) {
            Some(tail) if tail.starts_with('/') => (Route::A2aRest, tail.to_owned()),
            _ => (Route::Other, String::new()),
        };
    }
    let post = method == Method::POST;
    let mut segs = path.strip_prefix('/').unwrap_or(path).split('/');
    let segs = (segs.next(), segs.next(), segs.next(), segs.next());
    let (route, id) = match segs {
        (Some("tasks"), None, _, _) if post => (Route::CreateTask, ""),
        (Some("tasks"), Some(id), None, _) if get => (Route::GetTask, id),
        (Some("tasks"), Some(id), Some("cancel"), None) if post => (Route::CancelTask, id),
        (Some("tasks"), Some(id), Some("artifacts"), None) if get => (Route::ListArtifacts, id),
        (Some("tasks"), Some(id), Some("stream"), None) if get => (Route::Stream, id),
        (Some("artifacts"), Some(id), Some("content"), None) if get => (Route::ArtifactContent, id),
        (Some("downloads"), Some(id), None, _) if get => (Route::Download, id),
        _ => (Route::Other, ""),
    };
    if id.is_empty() && !matches!(route, Route::CreateTask | Route::Other) {
        return (Route::Other, String::new());
    }
    (route, id.to_string())
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<OutBody>, Dropped> {
    let (route, id) = classify(
        shared.protocol,
        &shared.card_path,
        req.method(),
        req.uri().path(),
    );
    shared.counts[route as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (parts, body) = req.into_parts();
    let body = if body.is_end_stream() {
        Bytes::new()
    } else {
        match Limited::new(body, MAX_BODY).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
                return Ok(error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "PAYLOAD_TOO_LARGE",
                    "request body too large",
                ));
            }
            Err(_) => return Err(Dropped),
        }
    };
    shared.record(|| Recorded {
        route,
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().map(str::to_string),
        headers: parts.headers.clone(),
        body: body.clone(),
    });
    let mut reply = shared.scripts.next(route);
    loop {
        match reply {
            Reply::Delay(wait, inner) => {
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = shared.stopped() => return Err(Dropped),
                }
                reply = *inner;
            }
            Reply::Default => {
                return Ok(match route {
                    Route::A2aJsonRpc => a2a_bindings::jsonrpc(&shared, &body),
                    Route::A2aRest => {
                        a2a_bindings::rest(&shared, &parts.method, &id, parts.uri.query(), &body)
                    }
                    Route::A2aGrpc => super::a2a_grpc::grpc(&shared, &id, &body),
                    _ => answer(&shared, route, &id, &parts.headers, &body),
                })
            }
            Reply::Json(status, value) => return Ok(json_response(status_code(status), &value)),
            Reply::Raw {
                status,
                content_type,
                body,
            } => {
                let mut resp = Response::new(OutBody::full(body));
                *resp.status_mut() = status_code(status);
                if let Ok(ct) = HeaderValue::from_str(&content_type) {
                    resp.headers_mut().insert(CONTENT_TYPE, ct);
                }
                return Ok(resp);
            }
            Reply::Hang => {
                shared.stopped().await;
                return Err(Dropped);
            }
            Reply::Close => return Err(Dropped),
        }
    }
}

/// The correct answer of each route.
fn answer(
    shared: &Arc<Shared>,
    route: Route,
    id: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response<OutBody> {
    match route {
        Route::Card => card(shared, headers),
        Route::CreateTask => create_task(shared, headers, body),
        Route::GetTask => match store_get(shared, |s| s.get_bytes(id)) {
            Some(task) => respond(StatusCode::OK, json_ct(), OutBody::full(task)),
            None => task_not_found(),
        },
        Route::CancelTask => match shared.cancel(id) {
            Cancel::Cancelled(task) => json_response(StatusCode::ACCEPTED, &task),
            Cancel::Terminal => error(
                StatusCode::CONFLICT,
                "TASK_TERMINAL",
                "the task is already in a terminal state",
            ),
            Cancel::Unknown => task_not_found(),
        },
        Route::ListArtifacts => match store_get(shared, |s| s.artifacts_of(id)) {
            Some(list) => json_response(StatusCode::OK, &json!({ "artifacts": list })),
            None => task_not_found(),
        },
        Route::ArtifactContent => match store_get(shared, |s| s.content(id)) {
            Some(Content::Inline { content_type, body }) => respond(
                StatusCode::OK,
                HeaderValue::from_static(content_type),
                OutBody::full(body),
            ),
            Some(Content::File { mime_type, body }) => file(&mime_type, body),
            Some(Content::Redirect { .. }) => {
                let location = format!("{}/downloads/{id}", shared.base_url);
                let mut resp = Response::new(OutBody::empty());
                *resp.status_mut() = StatusCode::FOUND;
                if let Ok(v) = HeaderValue::from_str(&location) {
                    resp.headers_mut().insert(LOCATION, v);
                }
                resp
            }
            None => artifact_not_found(),
        },
        Route::Download => match store_get(shared, |s| s.content(id)) {
            Some(Content::File { mime_type, body } | Content::Redirect { mime_type, body }) => {
                file(&mime_type, body)
            }
            _ => artifact_not_found(),
        },
        Route::Stream => stream(shared, id),
        // Answered by `a2a` before this (an A2A agent's routes).
        Route::A2aJsonRpc | Route::A2aRest | Route::A2aGrpc | Route::Other => {
            error(StatusCode::NOT_FOUND, "NOT_FOUND", "no such endpoint")
        }
    }
}

/// Runs `f` on the store and releases the lock before the answer is built.
fn store_get<T>(shared: &Shared, f: impl FnOnce(&super::state::Store) -> T) -> T {
    f(&lock(&shared.store))
}

fn card(shared: &Shared, headers: &HeaderMap) -> Response<OutBody> {
    let card = shared.card();
    let not_modified = etag_matches(headers, &card.etag);
    let mut resp = if not_modified {
        shared
            .card_not_modified
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut resp = Response::new(OutBody::empty());
        *resp.status_mut() = StatusCode::NOT_MODIFIED;
        resp
    } else {
        respond(StatusCode::OK, json_ct(), OutBody::full(card.body.clone()))
    };
    resp.headers_mut().insert(ETAG, card.etag.clone());
    if let Some(cc) = &card.cache_control {
        resp.headers_mut().insert(CACHE_CONTROL, cc.clone());
    }
    resp
}

/// `If-None-Match` uses the weak comparison (RFC 9110 §13.1.2), and `*` matches any card.
fn etag_matches(headers: &HeaderMap, etag: &HeaderValue) -> bool {
    let ours = etag.as_bytes();
    headers
        .get_all(IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t).as_bytes() == ours)
}

fn create_task(shared: &Arc<Shared>, headers: &HeaderMap, body: &Bytes) -> Response<OutBody> {
    let is_json = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return bad_request("Content-Type must be application/json");
    }
    let input = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(mut req)) => match req.remove("input") {
            Some(input @ Value::Object(_)) => input,
            _ => return bad_request("the body must have an `input` object"),
        },
        Ok(_) => return bad_request("the body must be a JSON object"),
        Err(_) => return bad_request("the body is not valid JSON"),
    };
    let agent_id = shared.card().agent_id.clone();
    let progress_input = shared.progress.map(|p| (p, input.clone()));
    let (task_id, task) = lock(&shared.store).create(&agent_id, input);
    if let Some((p, input)) = progress_input {
        progress::spawn(shared.clone(), task_id, input, p);
    }
    respond(StatusCode::ACCEPTED, json_ct(), OutBody::full(task))
}

fn stream(shared: &Shared, id: &str) -> Response<OutBody> {
    let opened = lock(&shared.store).open_stream(id);
    let body = match opened {
        Opened::Unknown => return task_not_found(),
        Opened::Terminal => OutBody::empty(),
        Opened::Stream(rx) => OutBody::Events(EventBody::new(rx, shared.ping_every)),
    };
    let mut resp = respond(
        StatusCode::OK,
        HeaderValue::from_static("text/event-stream"),
        body,
    );
    let headers = resp.headers_mut();
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Lets the nginx of the load runs pass events through instead of buffering them.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

fn file(mime_type: &str, body: Bytes) -> Response<OutBody> {
    let ct = HeaderValue::from_str(mime_type)
        .unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"));
    respond(StatusCode::OK, ct, OutBody::Chunked(body))
}

fn json_ct() -> HeaderValue {
    HeaderValue::from_static("application/json")
}

fn respond(status: StatusCode, content_type: HeaderValue, body: OutBody) -> Response<OutBody> {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, content_type);
    resp
}

fn json_response(status: StatusCode, value: &Value) -> Response<OutBody> {
    let body = serde_json::to_vec(value).unwrap_or_default();
    respond(status, json_ct(), OutBody::full(body))
}

fn status_code(status: u16) -> StatusCode {
    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// The error body every failure uses: `{"error":{"code":...,"message":...}}`.
fn error(status: StatusCode, code: &str, message: &str) -> Response<OutBody> {
    json_response(
        status,
        &json!({ "error": { "code": code, "message": message } }),
    )
}

fn bad_request(message: &str) -> Response<OutBody> {
    error(StatusCode::BAD_REQUEST, "INVALID_REQUEST", message)
}

fn task_not_found() -> Response<OutBody> {
    error(StatusCode::NOT_FOUND, "TASK_NOT_FOUND", "no such task")
}

fn artifact_not_found() -> Response<OutBody> {
    error(
        StatusCode::NOT_FOUND,
        "ARTIFACT_NOT_FOUND",
        "no such artifact",
    )
}
