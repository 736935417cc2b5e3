//! The one request pipeline. Every request, on every connection path (hyper's HTTP/1.1 and
//! HTTP/2 in `server`, the lean HTTP/1.1 stream path in `lean`), is answered by [`handle`], and
//! the body of [`handle`] is the order of the stages:
//!
//! 1. **request id**: the client's `x-request-id` if it is sane, else a fresh one. First, so
//!    that every later answer, error or not, carries it.
//! 2. **route**: the path and method pick a [`Route`], or 404 / 405 here. Before admission,
//!    because what a caller may do depends on the route.
//! 3. **admission** (`admission::admit`): authenticate the caller, take a token from its bucket
//!    if it has a rate, check the route's right, take a stream slot on the stream routes. After the route, because what a caller needs depends
//!    on it; before any handler, so a refused caller costs no handler work. A CORS preflight
//!    is answered here too (it carries no credentials: it asks what a later request may send).
//!    The checks that need the task (the caller may use its agent, and may see it) are made
//!    where a handler resolves the task, by `admission::agent` and `admission::task`; the
//!    agent's own limits (in flight, ejected) where the handler calls it
//!    (`exchange::admit_agent`), so that only requests that reach that far count.
//! 4. **handler**: one function per route (`dispatch::handler`, the table of which handler
//!    answers which route).
//! 5. **answer**: an error becomes the body its route answers errors with (`Route::errors`:
//!    the gateway's error body, or the route's wire form's error); an agent's own error answer loses
//!    its text for a client without `metrics` or `admin`; the request id is set on the answer,
//!    CORS headers for an allowed origin, a rate-limited client's `RateLimit` headers, and the
//!    request metrics are counted with the route, agent, client and status.
//!
//! No middleware stack: a reader finds the order here, in one function.

use std::sync::Arc;
use std::time::Instant;

use hyper::header::{HeaderValue, ALLOW};
use hyper::{Method, Response};

use super::admission;
use super::body::Body;
use super::context::{Conn, Ctx, Proof};
use super::cors;
use super::dispatch::handler;
use super::error::{ApiError, Code};
use super::exchange::AgentError;
use super::request::{request_id, Request, X_REQUEST_ID};
use super::route::Route;
use crate::auth::Caller;
use crate::state::State;
use crate::telemetry::{self, semconv, Span, Telemetry};
use opentelemetry::KeyValue;

/// The pipeline. Never fails: every error is an answer.
pub async fn handle(state: &Arc<State>, conn: &Conn, req: Request) -> Response<Body> {
    let started = Instant::now();
    // 1. request id
    let mut ctx = Ctx {
        request_id: request_id(req.headers()),
        peer_ip: conn.peer_ip.clone(),
        agent: None,
        kill: conn.kill.clone(),
        // Until admission says otherwise: no agent, no task, no right.
        caller: Caller::Public,
        proof: Proof::None,
        permit: None,
        quota: None,
        https: conn.https,
        cert_subject: conn.cert_subject.clone(),
        trace: None,
        started,
        speaks: None,
        a2a_method: None,
        replica: Default::default(),
    };
    let origin = cors::origin(state, req.headers());
    // 2. route (the path is copied: the route borrows it while the handler owns the request)
    let path = req.uri().path().to_owned();
    let route = Route::parse_with(&path, |name| state.registry.owns_its_paths(name))
        .with_method(req.method());
    let (label, method) = route.meta();
    // Which shape the gateway's own errors take here: the route's.
    let errors = route.errors(req.headers(), req.uri().query());
    let verb = req.method().clone();
    // The request's span, once the route names it (telemetry on): continues the caller's
    // trace; the handlers' spans are its children.
    let root = state
        .telemetry
        .as_ref()
        .map(|t| request_span(t, &req, &route, label, &ctx));
    ctx.trace = root.as_ref().map(Span::trace);
    let result = if let Some(answer) = cors::preflight(state, &route, &req) {
        answer
    } else {
        match check_method(&path, &route, &method, req.method()) {
            Err(e) => Err(e),
            // 3. admission, then 4. handler
            Ok(()) => match admission::admit(state, &mut ctx, &route, &req).await {
                Err(e) => Err(e),
                // A traced request's log lines carry its trace id (`log_format = "json"`).
                Ok(()) => match &root {
                    Some(r) => r.scope(handler(state, &mut ctx, route, req)).await,
                    None => handler(state, &mut ctx, route, req).await,
                },
            },
        }
    };
    // 5. answer: the gateway's own errors in the route's shape.
    let mut res = match result {
        Ok(res) => res,
        Err(e) => errors.answer(e),
    };
    // No agent address reaches a client: URL headers naming the agent's origin are dropped.
    if let Some(agent) = &ctx.agent {
        super::public::drop_agent_urls(agent, res.headers_mut());
    }
    // An agent's own error text reaches only clients that may read agents' errors.
    if let Some(e) = res.extensions().get::<AgentError>().cloned() {
        if !ctx.caller.reads_agents_texts() {
            let agent = ctx.agent.as_ref().map_or("", |a| a.cfg.name.as_str());
            res = e.withheld(res, agent);
        }
    }
    res.headers_mut()
        .insert(X_REQUEST_ID.clone(), ctx.request_id);
    cors::answer(state, res.headers_mut(), origin);
    if let Some(q) = &ctx.quota {
        admission::quota_headers(res.headers_mut(), q);
    }
    let agent = ctx.agent.as_ref().map_or("", |a| a.cfg.name.as_str());
    let client = ctx.caller.label();
    let m = &state.metrics;
    m.requests
        .with_label_values(&[label, agent, client, res.status().as_str()])
        .inc();
    let elapsed = started.elapsed();
    m.request_seconds
        .with_label_values(&[label, agent, client])
        .observe(elapsed.as_secs_f64());
    let status = res.status().as_u16();
    if let Some(root) = &root {
        telemetry::answered(root, status, true);
        if !agent.is_empty() {
            root.set(KeyValue::new(telemetry::AGENT, agent.to_owned()));
        }
        root.set(KeyValue::new(telemetry::CLIENT, client.to_owned()));
    }
    if state.config.access_log {
        // Never the path's query (a stream's `access_token`) nor any header: the route, not
        // the path, names what was asked.
        let request_id = res
            .headers()
            .get(X_REQUEST_ID.clone())
            .and_then(|v| v.to_str().ok());
        let trace_id = root.as_ref().map(|r| r.trace_id());
        tracing::info!(target: "a2a_gateway::access", client, agent, method = %verb, route = label, status,
            duration_ms = elapsed.as_secs_f64() * 1000.0, request_id, trace_id, "request");
    }
    res
}

/// The server span of a request (OpenTelemetry's HTTP conventions, plus the gateway's ids).
fn request_span(
    t: &Arc<Telemetry>,
    req: &Request,
    route: &Route<'_>,
    label: &'static str,
    ctx: &Ctx,
) -> Span {
    let mut attributes = vec![
        KeyValue::new(
            semconv::HTTP_REQUEST_METHOD,
            req.method().as_str().to_owned(),
        ),
        KeyValue::new(telemetry::ROUTE, label),
        KeyValue::new(semconv::URL_PATH, req.uri().path().to_owned()),
        KeyValue::new(
            semconv::URL_SCHEME,
            if ctx.https { "https" } else { "http" },
        ),
        KeyValue::new(
            semconv::CLIENT_ADDRESS,
            ctx.peer_ip.to_str().unwrap_or("").to_owned(),
        ),
        KeyValue::new(
            telemetry::REQUEST_ID,
            ctx.request_id.to_str().unwrap_or("").to_owned(),
        ),
    ];
    if let Some(task) = route.task_id() {
        attributes.push(KeyValue::new(telemetry::TASK_ID, task.to_owned()));
    }
    // OpenTelemetry's HTTP span name: `{method} {http.route}`, or the method alone for a path
    // that is no route.
    let name = match route.template() {
        Some(template) => {
            attributes.push(KeyValue::new(semconv::HTTP_ROUTE, template));
            format!("{} {template}", req.method())
        }
        None => req.method().to_string(),
    };
    t.server_span(req.headers(), name, attributes)
}

/// 404 for no route, 405 (with `Allow`) for the wrong method. A local GET route answers HEAD.
fn check_method(
    path: &str,
    route: &Route<'_>,
    want: &Method,
    got: &Method,
) -> Result<(), ApiError> {
    if route.checks_own_methods() {
        // Each path of a wire form takes its own methods: its handler answers 405 for it.
        return Ok(());
    }
    if *route == Route::NotFound {
        return Err(ApiError::new(
            Code::NotFound,
            format!("no route for {path}"),
        ));
    }
    if got == want || (got == Method::HEAD && want == Method::GET && route.is_local()) {
        return Ok(());
    }
    let allow = match route {
        // One path, two routes (`Route::with_method`).
        Route::CreateTask(None) | Route::ListTasks => "GET, POST",
        _ if want == Method::POST => "POST",
        _ => "GET",
    };
    Err(ApiError::new(
        Code::MethodNotAllowed,
        format!("{got} is not allowed here; use {want}"),
    )
    .with_header(ALLOW, HeaderValue::from_static(allow)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future `f` returns, without calling it.
    fn future_size<A, B, C, F: std::future::Future>(_f: impl FnOnce(A, B, C) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// Every request's future is moved whole at least once (into hyper's in-flight slot), and
    /// each handler's future is moved into its caller's as it is awaited: the size of the
    /// largest branch at each level is paid by every request. Trace::scope as an `async fn`
    /// once held the handler twice (17.4 KB in a test build); with it fixed, 9.6 KB; with the
    /// A2A stream and the A2A calls other than SendMessage boxed, 7.6 KB. Sizes are the
    /// compiler's: a toolchain upgrade may move them by a little, not by kilobytes.
    #[test]
    fn a_requests_future_stays_small() {
        let size = future_size(|state: Arc<State>, conn: Conn, req: Request| async move {
            handle(&state, &conn, req).await
        });
        assert!(
            size <= 9 * 1024,
            "the future of one request is {size} bytes: box the handler that grew it"
        );
    }
}
