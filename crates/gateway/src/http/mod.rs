//! The HTTP edge: listener, an explicit ordered request pipeline, and the route handlers.
//!
//! Pipeline, in order, for every request: request id → route match (405/404 here) → handler →
//! `x-request-id` on the answer → metrics. No middleware stack: the order is this function.

mod admin;
pub mod body;
mod catalog;
pub mod error;
mod events;
mod notifications;
mod server;
mod sse_conn;
mod tasks;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue, ALLOW};
use hyper::{Method, Request, Response};

pub use server::{bind, serve};

use crate::registry::Agent;
use crate::State;
use body::Body;
use error::{ApiError, Code};

static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// What a handler knows of the request besides the request itself; handlers set `agent` once
/// they have resolved it so the metrics carry the agent label.
pub struct Ctx {
    pub request_id: HeaderValue,
    pub peer: SocketAddr,
    pub agent: Option<Arc<Agent>>,
    /// Ends the client's connection from outside its task (a slow event-stream consumer whose
    /// socket is full is never polled, so it cannot end itself).
    pub kill: Arc<tokio::sync::Notify>,
}

/// Every route of the gateway. Segments borrow from the request path.
#[derive(Debug, PartialEq, Eq)]
enum Route<'a> {
    Healthz,
    Readyz,
    Metrics,
    Catalog,
    Card(&'a str),
    CreateTask(Option<&'a str>),
    GetTask(Option<&'a str>, &'a str),
    CancelTask(Option<&'a str>, &'a str),
    ListArtifacts(Option<&'a str>, &'a str),
    Stream(Option<&'a str>, &'a str),
    ArtifactContent(Option<&'a str>, &'a str),
    Notifications(&'a str),
    Events,
    DeadLetters,
    Redrive,
    Subscribers,
    EnableSubscriber(&'a str),
    NotFound,
}

impl<'a> Route<'a> {
    fn parse(path: &'a str) -> Route<'a> {
        let mut segs = path.strip_prefix('/').unwrap_or(path).split('/');
        let parts: [Option<&str>; 6] = std::array::from_fn(|_| segs.next());
        if segs.next().is_some() {
            return Route::NotFound;
        }
        match parts {
            [Some("healthz"), None, ..] => Route::Healthz,
            [Some("readyz"), None, ..] => Route::Readyz,
            [Some("metrics"), None, ..] => Route::Metrics,
            [Some("agents"), None, ..] => Route::Catalog,
            [Some("events"), None, ..] => Route::Events,
            [Some("admin"), Some("dead-letters"), None, ..] => Route::DeadLetters,
            [Some("admin"), Some("dead-letters"), Some("redrive"), None, ..] => Route::Redrive,
            [Some("admin"), Some("subscribers"), None, ..] => Route::Subscribers,
            [Some("admin"), Some("subscribers"), Some(s), Some("enable"), None, ..]
                if !s.is_empty() =>
            {
                Route::EnableSubscriber(s)
            }
            [Some("agents"), Some(a), Some("agent-card.json"), None, ..] if !a.is_empty() => {
                Route::Card(a)
            }
            [Some("agents"), Some(a), rest @ ..] if !a.is_empty() => {
                Route::task_routes(Some(a), [rest[0], rest[1], rest[2], rest[3]])
            }
            [first, second, third, fourth, None, None] => {
                Route::task_routes(None, [first, second, third, fourth])
            }
            _ => Route::NotFound,
        }
    }

    fn task_routes(agent: Option<&'a str>, p: [Option<&'a str>; 4]) -> Route<'a> {
        let id = |s: &'a str| valid_id(s).then_some(s);
        match p {
            [Some("tasks"), None, None, None] => Route::CreateTask(agent),
            [Some("notifications"), None, None, None] => {
                agent.map_or(Route::NotFound, Route::Notifications)
            }
            [Some("tasks"), Some(t), None, None] => {
                id(t).map_or(Route::NotFound, |t| Route::GetTask(agent, t))
            }
            [Some("tasks"), Some(t), Some("cancel"), None] => {
                id(t).map_or(Route::NotFound, |t| Route::CancelTask(agent, t))
            }
            [Some("tasks"), Some(t), Some("artifacts"), None] => {
                id(t).map_or(Route::NotFound, |t| Route::ListArtifacts(agent, t))
            }
            [Some("tasks"), Some(t), Some("stream"), None] => {
                id(t).map_or(Route::NotFound, |t| Route::Stream(agent, t))
            }
            [Some("artifacts"), Some(a), Some("content"), None] => {
                id(a).map_or(Route::NotFound, |a| Route::ArtifactContent(agent, a))
            }
            _ => Route::NotFound,
        }
    }

    /// Answered by the gateway itself (so HEAD is answered like GET, without a body).
    fn is_local(&self) -> bool {
        matches!(
            self,
            Route::Healthz | Route::Readyz | Route::Metrics | Route::Catalog | Route::Card(_)
        )
    }

    /// (metrics label, the one method the route answers)
    fn meta(&self) -> (&'static str, Method) {
        match self {
            Route::Healthz => ("healthz", Method::GET),
            Route::Readyz => ("readyz", Method::GET),
            Route::Metrics => ("metrics", Method::GET),
            Route::Catalog => ("catalog", Method::GET),
            Route::Card(_) => ("card", Method::GET),
            Route::CreateTask(_) => ("create_task", Method::POST),
            Route::GetTask(..) => ("get_task", Method::GET),
            Route::CancelTask(..) => ("cancel_task", Method::POST),
            Route::ListArtifacts(..) => ("list_artifacts", Method::GET),
            Route::Stream(..) => ("stream", Method::GET),
            Route::ArtifactContent(..) => ("artifact_content", Method::GET),
            Route::Notifications(_) => ("notifications", Method::POST),
            Route::Events => ("events", Method::GET),
            Route::DeadLetters => ("admin_dead_letters", Method::GET),
            Route::Redrive => ("admin_redrive", Method::POST),
            Route::Subscribers => ("admin_subscribers", Method::GET),
            Route::EnableSubscriber(_) => ("admin_enable_subscriber", Method::POST),
            Route::NotFound => ("not_found", Method::GET),
        }
    }
}

/// The (agent prefix, task id) of a task-stream path, for the lean event-stream path.
pub(crate) fn stream_route(path: &str) -> Option<(Option<&str>, &str)> {
    match Route::parse(path) {
        Route::Stream(a, t) => Some((a, t)),
        _ => None,
    }
}

/// Ids go into the agent's URL path, so only unreserved characters are let through (no `..`,
/// no `/`, no percent-escapes): a crafted id cannot reach another path on the agent.
fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The request id: the client's if it is sane, else a fresh UUID.
fn request_id(req: &Request<Incoming>) -> HeaderValue {
    request_id_of(req.headers())
}

fn request_id_of(headers: &hyper::HeaderMap) -> HeaderValue {
    headers
        .get(&X_REQUEST_ID)
        .filter(|v| {
            !v.is_empty() && v.len() <= 128 && v.as_bytes().iter().all(|b| b.is_ascii_graphic())
        })
        .cloned()
        .unwrap_or_else(|| {
            let mut buf = uuid::Uuid::encode_buffer();
            let s = uuid::Uuid::new_v4().hyphenated().encode_lower(&mut buf);
            HeaderValue::from_str(s).unwrap_or(HeaderValue::from_static("invalid"))
        })
}

/// The pipeline. Never fails: every error is an answer.
pub async fn handle(
    state: Arc<State>,
    peer: SocketAddr,
    kill: Arc<tokio::sync::Notify>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let started = Instant::now();
    let mut ctx = Ctx {
        request_id: request_id(&req),
        peer,
        agent: None,
        kill,
    };
    let path = req.uri().path().to_owned();
    let route = Route::parse(&path);
    let (label, method) = route.meta();
    let result = if route == Route::NotFound {
        Err(ApiError::new(
            Code::NotFound,
            format!("no route for {path}"),
        ))
    } else if req.method() != method
        && !(req.method() == Method::HEAD && method == Method::GET && route.is_local())
    {
        let mut res = ApiError::new(
            Code::MethodNotAllowed,
            format!("{} is not allowed here; use {method}", req.method()),
        )
        .into_response();
        let allow = if method == Method::POST {
            "POST"
        } else {
            "GET"
        };
        res.headers_mut()
            .insert(ALLOW, HeaderValue::from_static(allow));
        Ok(res)
    } else {
        dispatch(&state, &mut ctx, route, req).await
    };
    let mut res = result.unwrap_or_else(ApiError::into_response);
    res.headers_mut()
        .insert(X_REQUEST_ID.clone(), ctx.request_id.clone());
    let agent = ctx.agent.as_ref().map_or("", |a| a.cfg.name.as_str());
    count_request(&state, label, agent, res.status(), started);
    Ok(res)
}

/// The request metrics of one answer (the hyper pipeline's and the lean stream path's).
fn count_request(
    state: &State,
    route: &str,
    agent: &str,
    status: hyper::StatusCode,
    started: Instant,
) {
    let m = &state.metrics;
    m.requests
        .with_label_values(&[route, agent, status.as_str()])
        .inc();
    m.request_seconds
        .with_label_values(&[route, agent])
        .observe(started.elapsed().as_secs_f64());
}

async fn dispatch(
    state: &Arc<State>,
    ctx: &mut Ctx,
    route: Route<'_>,
    req: Request<Incoming>,
) -> error::ApiResult {
    match route {
        Route::Healthz => catalog::healthz(),
        Route::Readyz => catalog::readyz(state),
        Route::Metrics => catalog::metrics(state).await,
        Route::Catalog => catalog::agents(state),
        Route::Card(a) => catalog::card(state, ctx, a, &req),
        Route::CreateTask(a) => tasks::create(state, ctx, a, req).await,
        Route::GetTask(a, t) => tasks::get(state, ctx, a, t, req).await,
        Route::CancelTask(a, t) => tasks::cancel(state, ctx, a, t, req).await,
        Route::ListArtifacts(a, t) => tasks::artifacts(state, ctx, a, t, req).await,
        Route::Stream(a, t) => tasks::stream(state, ctx, a, t, req).await,
        Route::ArtifactContent(a, id) => tasks::content(state, ctx, a, id, req).await,
        Route::Notifications(a) => notifications::ingest(state, ctx, a, req).await,
        Route::Events => events::events(state, req).await,
        Route::DeadLetters => admin::dead_letters(state, req).await,
        Route::Redrive => admin::redrive(state, req).await,
        Route::Subscribers => admin::subscribers(state, req).await,
        Route::EnableSubscriber(s) => admin::enable(state, s, req).await,
        Route::NotFound => Err(ApiError::new(Code::NotFound, "no such route")),
    }
}

#[cfg(test)]
mod tests {
    use super::Route::*;
    use super::*;

    #[test]
    fn routes_parse() {
        assert_eq!(Route::parse("/healthz"), Healthz);
        assert_eq!(Route::parse("/agents"), Catalog);
        assert_eq!(Route::parse("/agents/x/agent-card.json"), Card("x"));
        assert_eq!(Route::parse("/agents/x/tasks"), CreateTask(Some("x")));
        assert_eq!(Route::parse("/tasks"), CreateTask(None));
        assert_eq!(
            Route::parse("/agents/x/tasks/t-1"),
            GetTask(Some("x"), "t-1")
        );
        assert_eq!(Route::parse("/tasks/t/cancel"), CancelTask(None, "t"));
        assert_eq!(
            Route::parse("/agents/x/tasks/t/artifacts"),
            ListArtifacts(Some("x"), "t")
        );
        assert_eq!(Route::parse("/tasks/t/stream"), Stream(None, "t"));
        assert_eq!(
            Route::parse("/artifacts/a/content"),
            ArtifactContent(None, "a")
        );
        assert_eq!(
            Route::parse("/agents/x/artifacts/a/content"),
            ArtifactContent(Some("x"), "a")
        );
        assert_eq!(Route::parse("/admin/dead-letters"), DeadLetters);
        assert_eq!(Route::parse("/admin/dead-letters/redrive"), Redrive);
        assert_eq!(
            Route::parse("/admin/subscribers/s1/enable"),
            EnableSubscriber("s1")
        );
        assert_eq!(Route::parse("/admin/subscribers//enable"), NotFound);
    }

    #[test]
    fn crafted_paths_do_not_route() {
        for p in [
            "/tasks/../agent-card.json",
            "/tasks/a%2Fb",
            "/agents//tasks",
            "/agents/x/tasks/t/cancel/x",
            "/tasks/t/",
            "/",
            "/agents/x/tasks/t/x/y/z",
        ] {
            assert_eq!(Route::parse(p), NotFound, "{p}");
        }
    }
}
