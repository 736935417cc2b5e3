//! The one request pipeline. Every request, on every connection path (hyper's HTTP/1.1 and
//! HTTP/2 in `server`, the lean HTTP/1.1 stream path in `lean`), is answered by [`handle`], and
//! the body of [`handle`] is the order of the stages:
//!
//! 1. **request id**: the client's `x-request-id` if it is sane, else a fresh one. First, so
//!    that every later answer, error or not, carries it.
//! 2. **route**: the path and method pick a [`Route`], or 404 / 405 here. Before admission,
//!    because what a caller may do depends on the route.
//! 3. **admission** (authenticate, authorize, limit): the edge's checks sit here, after the
//!    route and before any handler, so a refused caller costs no handler work. Today every
//!    caller is admitted; the identity and limits issues fill this stage.
//! 4. **handler**: one function per route, in `handlers/`.
//! 5. **answer**: an error becomes its JSON body (`error`), the request id is set on the answer,
//!    and the request metrics are counted with the route, agent and status.
//!
//! No middleware stack: a reader finds the order here, in one function.

use std::time::Instant;

use hyper::header::{HeaderValue, ALLOW};
use hyper::{Method, Response};

use super::body::Body;
use super::context::{Conn, Ctx};
use super::error::{ApiError, ApiResult, Code};
use super::handlers::{admin, artifacts, catalog, events, notifications, probes, streams, tasks};
use super::request::{request_id, Request, X_REQUEST_ID};
use super::route::Route;
use crate::State;

/// The pipeline. Never fails: every error is an answer.
pub async fn handle(state: &State, conn: &Conn, req: Request) -> Response<Body> {
    let started = Instant::now();
    // 1. request id
    let mut ctx = Ctx {
        request_id: request_id(req.headers()),
        peer: conn.peer,
        agent: None,
        kill: conn.kill.clone(),
    };
    // 2. route (the path is copied: the route borrows it while the handler owns the request)
    let path = req.uri().path().to_owned();
    let route = Route::parse(&path);
    let (label, method) = route.meta();
    let result = match check_method(&path, &route, &method, req.method()) {
        Err(e) => Err(e),
        // 3. admission: every caller is admitted (see the module doc).
        // 4. handler
        Ok(()) => dispatch(state, &mut ctx, route, req).await,
    };
    // 5. answer
    let mut res = result.unwrap_or_else(ApiError::into_response);
    res.headers_mut()
        .insert(X_REQUEST_ID.clone(), ctx.request_id);
    let agent = ctx.agent.as_ref().map_or("", |a| a.cfg.name.as_str());
    let m = &state.metrics;
    m.requests
        .with_label_values(&[label, agent, res.status().as_str()])
        .inc();
    m.request_seconds
        .with_label_values(&[label, agent])
        .observe(started.elapsed().as_secs_f64());
    res
}

/// 404 for no route, 405 (with `Allow`) for the wrong method. A local GET route answers HEAD.
fn check_method(
    path: &str,
    route: &Route<'_>,
    want: &Method,
    got: &Method,
) -> Result<(), ApiError> {
    if *route == Route::NotFound {
        return Err(ApiError::new(
            Code::NotFound,
            format!("no route for {path}"),
        ));
    }
    if got == want || (got == Method::HEAD && want == Method::GET && route.is_local()) {
        return Ok(());
    }
    let allow = if want == Method::POST { "POST" } else { "GET" };
    Err(ApiError::new(
        Code::MethodNotAllowed,
        format!("{got} is not allowed here; use {want}"),
    )
    .with_header(ALLOW, HeaderValue::from_static(allow)))
}

async fn dispatch(state: &State, ctx: &mut Ctx, route: Route<'_>, req: Request) -> ApiResult {
    match route {
        Route::Healthz => probes::healthz(),
        Route::Readyz => probes::readyz(state),
        Route::Metrics => probes::metrics(state).await,
        Route::Catalog => catalog::agents(state),
        Route::Card(a) => catalog::card(state, ctx, a),
        Route::CreateTask(a) => tasks::create(state, ctx, a, req).await,
        Route::GetTask(a, t) => tasks::get(state, ctx, a, t, req).await,
        Route::CancelTask(a, t) => tasks::cancel(state, ctx, a, t, req).await,
        Route::ListArtifacts(a, t) => artifacts::list(state, ctx, a, t, req).await,
        Route::ArtifactContent(a, id) => artifacts::content(state, ctx, a, id, req).await,
        Route::Stream(a, t) => streams::subscribe(state, ctx, a, t, req).await,
        Route::Notifications(a) => notifications::ingest(state, ctx, a, req).await,
        Route::Events => events::events(state, req).await,
        Route::DeadLetters => admin::dead_letters(state, req).await,
        Route::Redrive => admin::redrive(state, req).await,
        Route::Subscribers => admin::subscribers(state, req).await,
        Route::EnableSubscriber(s) => admin::enable(state, s, req).await,
        Route::NotFound => Err(ApiError::new(Code::NotFound, "no such route")),
    }
}
