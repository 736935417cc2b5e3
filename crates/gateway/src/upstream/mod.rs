//! The one pooled client towards agents, and the header hygiene of a reverse proxy.
//!
//! Built once: keep-alive pool with a timer (without one, idle connections are never reaped),
//! TCP_NODELAY, a connect timeout, HTTP/1.1 and HTTP/2 over rustls with the webpki roots (an
//! agent with its own `ca_file` gets a connector that also trusts that CA, for its origin
//! only: [`AgentConnector`]). hyper has no request timeout; callers wrap each exchange in
//! `tokio::time::timeout` with the agent's.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, Uri};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::config::AgentConfig;

mod http1;
pub mod names;

/// The pooled client type towards agents.
pub type HttpClient = Client<AgentConnector, Full<Bytes>>;

/// Why a client towards agents (or subscribers) could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The TLS roots could not be set up.
    #[error("TLS setup: {0}")]
    Tls(rustls::Error),
    /// An agent's `ca_file` cannot be used.
    #[error("agent {agent:?} ca_file: {source}")]
    CaFile {
        /// The agent's route name.
        agent: String,
        /// Why the file cannot be used.
        source: crate::tls::TlsError,
    },
}

/// HTTP/1.1 + HTTP/2 over rustls on `http`: the webpki roots, or `tls` when given (an agent's
/// own roots).
fn https<R>(
    http: HttpConnector<R>,
    tls: Option<rustls::ClientConfig>,
    names: bool,
) -> Result<HttpsConnector<HttpConnector<R>>, ClientError> {
    let builder = match tls {
        Some(config) => HttpsConnectorBuilder::new().with_tls_config(config),
        // The ring provider is passed explicitly so no process-wide default has to be installed.
        None => HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .map_err(ClientError::Tls)?,
    };
    let builder = builder.https_or_http();
    // Towards agents, a discovered replica's certificate is verified by its configured name.
    let builder = if names {
        builder.with_server_name_resolver(names::Names)
    } else {
        builder
    };
    Ok(builder.enable_http1().enable_http2().wrap_connector(http))
}

/// A pool's builder, with a timer so idle connections are reaped after `idle`.
fn builder(idle: Duration) -> hyper_util::client::legacy::Builder {
    let mut b = Client::builder(TokioExecutor::new());
    b.pool_timer(TokioTimer::new())
        .timer(TokioTimer::new())
        .pool_idle_timeout(idle);
    b
}

/// A pool on `connector`, with a timer so idle connections are reaped.
fn pool<C>(connector: C, idle: Duration, max_idle_per_host: usize) -> Client<C, Full<Bytes>>
where
    C: hyper_util::client::legacy::connect::Connect + Clone,
{
    builder(idle)
        .pool_max_idle_per_host(max_idle_per_host)
        .build(connector)
}

/// A pool of HTTP/2 connections only, for gRPC agents: h2c with prior knowledge on `http://`,
/// ALPN `h2` on `https://`. One connection per origin carries every call (HTTP/2 multiplexes),
/// kept alive by HTTP/2 pings.
fn h2_pool<C>(connector: C, idle: Duration) -> Client<C, Full<Bytes>>
where
    C: hyper_util::client::legacy::connect::Connect + Clone,
{
    builder(idle)
        .http2_only(true)
        .http2_keep_alive_interval(Duration::from_secs(30))
        .http2_keep_alive_while_idle(true)
        .build(connector)
}

/// Whether a request is a gRPC call (sent on the HTTP/2 pool, its trailers read).
fn is_grpc(req: &Request<Full<Bytes>>) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"))
}

/// A pooled HTTP/1.1 + HTTP/2 client over rustls (webpki roots) on `http`, with a timer so idle
/// connections are reaped. The webhook sender's (its connector resolves through the URL guard).
pub fn pooled_client<R>(
    http: HttpConnector<R>,
    idle: Duration,
    max_idle_per_host: usize,
) -> Result<Client<HttpsConnector<HttpConnector<R>>, Full<Bytes>>, ClientError>
where
    R: Clone + Send + Sync + 'static,
    HttpConnector<R>: tower_service::Service<Uri> + Clone + Send + Sync + 'static,
    <HttpConnector<R> as tower_service::Service<Uri>>::Response:
        hyper::rt::Read
            + hyper::rt::Write
            + hyper_util::client::legacy::connect::Connection
            + Send
            + Unpin,
    <HttpConnector<R> as tower_service::Service<Uri>>::Future: Send + Unpin + 'static,
    <HttpConnector<R> as tower_service::Service<Uri>>::Error:
        Into<Box<dyn std::error::Error + Send + Sync>>,
{
    Ok(pool(https(http, None, false)?, idle, max_idle_per_host))
}

/// The HTTP/1.1 + HTTP/2 client of an identity provider's documents (`[[auth.oidc]]`): rustls
/// with the webpki roots plus `ca_file`'s CAs when given, this connect timeout, a small pool.
/// Redirects are never followed (hyper follows none).
pub fn issuer_client(
    connect_timeout: Duration,
    ca_file: Option<&std::path::Path>,
) -> Result<Client<HttpsConnector<HttpConnector>, Full<Bytes>>, String> {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect_timeout));
    http.enforce_http(false);
    let tls = match ca_file {
        Some(ca) => Some(crate::tls::agent_client_config(ca).map_err(|e| e.to_string())?),
        None => None,
    };
    Ok(pool(
        https(http, tls, false).map_err(|e| e.to_string())?,
        Duration::from_secs(90),
        2,
    ))
}

/// An https origin as connections are pooled: lower-case host (as the URI spells it, `[::1]`
/// for IPv6) and port.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    host: String,
    port: u16,
}

impl Origin {
    fn of_url(url: &str) -> Option<Origin> {
        let uri: Uri = url.parse().ok()?;
        (uri.scheme_str() == Some("https")).then(|| Origin {
            host: uri.host().unwrap_or_default().to_ascii_lowercase(),
            port: uri.port_u16().unwrap_or(443),
        })
    }

    fn matches(&self, uri: &Uri) -> bool {
        uri.scheme_str() == Some("https")
            && uri.port_u16().unwrap_or(443) == self.port
            && uri
                .host()
                .is_some_and(|h| h.eq_ignore_ascii_case(&self.host))
    }
}

/// The connector towards agents. Every origin gets the shared connector (webpki roots) but the
/// origins of agents with a `ca_file`, which get one whose roots add that agent's CA, so no
/// other agent is ever verified against it (`check-config` refuses two agents on one origin
/// with different `ca_file`s, as they would share pooled connections). Chosen when a
/// connection is made, never per request: a request on a pooled connection does not come
/// here, and without any `ca_file` it is one emptiness check per new connection.
#[derive(Clone)]
pub struct AgentConnector {
    shared: HttpsConnector<HttpConnector>,
    own: Arc<[(Origin, HttpsConnector<HttpConnector>)]>,
}

impl AgentConnector {
    /// The connector for `agents` over `http`; fails if an agent's `ca_file` cannot be used.
    pub fn new(http: HttpConnector, agents: &[AgentConfig]) -> Result<AgentConnector, ClientError> {
        let mut own: Vec<(Origin, HttpsConnector<HttpConnector>)> = Vec::new();
        for a in agents {
            let Some(ca) = a.ca_file.as_deref() else {
                continue;
            };
            // The agent's origins: each replica's url's, and its gRPC service's when
            // configured apart.
            let origins = std::iter::once(&a.url)
                .chain(a.urls.iter())
                .chain(a.grpc_url.as_ref())
                .filter_map(|u| Origin::of_url(u));
            for origin in origins {
                if own.iter().any(|(o, _)| *o == origin) {
                    continue; // the same CA: check-config refuses another on one origin
                }
                let config = crate::tls::agent_client_config(std::path::Path::new(ca)).map_err(
                    |source| ClientError::CaFile {
                        agent: a.name.clone(),
                        source,
                    },
                )?;
                own.push((origin, https(http.clone(), Some(config), true)?));
            }
        }
        Ok(AgentConnector {
            shared: https(http, None, true)?,
            own: own.into(),
        })
    }

    fn pick(&self, dst: &Uri) -> Option<&HttpsConnector<HttpConnector>> {
        if self.own.is_empty() {
            return None;
        }
        let own = self.own.iter().find(|(o, _)| o.matches(dst));
        // A discovered replica, called at its address, trusts its agent's CA by name.
        own.or_else(|| {
            let name = names::name_of(dst)?;
            let port = dst.port_u16().unwrap_or(443);
            self.own
                .iter()
                .find(|(o, _)| o.port == port && o.host.eq_ignore_ascii_case(&name))
        })
        .map(|(_, c)| c)
    }
}

impl tower_service::Service<Uri> for AgentConnector {
    type Response = <HttpsConnector<HttpConnector> as tower_service::Service<Uri>>::Response;
    type Error = <HttpsConnector<HttpConnector> as tower_service::Service<Uri>>::Error;
    type Future = <HttpsConnector<HttpConnector> as tower_service::Service<Uri>>::Future;

    /// Ready when the TCP connector is: every connector here wraps a clone of one
    /// `HttpConnector`, which is always ready.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.shared.poll_ready(cx)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        match self.pick(&dst) {
            Some(own) => own.clone().call(dst),
            None => self.shared.call(dst),
        }
    }
}

/// Largest JSON answer read from an agent (Tasks and artifact lists; files are streamed).
pub const MAX_AGENT_JSON: usize = 8 << 20;

/// Why an exchange with an agent failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    /// No connection, or the connection broke before the answer was read.
    #[error("unreachable: {0}")]
    Unreachable(String),
    /// No (whole) answer within the agent's timeout.
    #[error("no answer within {} ms", .0.as_millis())]
    Timeout(Duration),
    /// The answer was longer than the gateway reads.
    #[error("answer over {0} bytes")]
    TooLarge(usize),
}

impl UpstreamError {
    /// This error, as the failure of an exchange with the agent named `agent`.
    pub fn at(self, agent: &str) -> AgentError {
        AgentError {
            agent: agent.to_owned(),
            error: self,
        }
    }
}

/// A failed exchange with a named agent: AGENT_TIMEOUT, AGENT_UNREACHABLE or
/// AGENT_PROTOCOL_VIOLATION (an oversized answer) at the HTTP edge.
#[derive(Debug, Clone, thiserror::Error)]
#[error("agent {agent:?}: {error}")]
pub struct AgentError {
    /// The agent's route name.
    pub agent: String,
    /// What went wrong.
    pub error: UpstreamError,
}

/// How long a connection to an agent may sit idle in the pool: under the 5 s after which
/// uvicorn (a2a-sdk's servers) and Node's http server (@a2a-js/sdk's) close an idle
/// connection themselves. Kept longer, a pooled connection is now and then reused just as the
/// agent closes it, and the request fails ("connection closed before message completed"); a
/// busy pool reuses its connections long before either side's timer.
pub const AGENT_IDLE: Duration = Duration::from_secs(4);

/// The client towards agents: one per worker, cheap to clone (clones share the pools).
#[derive(Clone)]
pub struct Upstream {
    client: HttpClient,
    /// gRPC agents' calls (see [`h2_pool`]).
    grpc: HttpClient,
    /// Buffered exchanges with `http://` agents (the create path): see [`http1`].
    http1: Arc<http1::Http1Pool>,
}

impl Upstream {
    /// A client with TCP_NODELAY, this connect timeout, TCP keep-alive and a pool of 256 idle
    /// connections per host, reaped after [`AGENT_IDLE`]; `agents`' `ca_file`s are trusted for their
    /// origins (see [`AgentConnector`]). Fails if one of them cannot be used.
    pub fn new(connect_timeout: Duration, agents: &[AgentConfig]) -> Result<Upstream, ClientError> {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.set_connect_timeout(Some(connect_timeout));
        http.enforce_http(false);
        http.set_keepalive(Some(Duration::from_secs(60)));
        let http1 = Arc::new(http1::Http1Pool::new(http.clone(), 256, AGENT_IDLE));
        let connector = AgentConnector::new(http, agents)?;
        let grpc = h2_pool(connector.clone(), AGENT_IDLE);
        let client = pool(connector, AGENT_IDLE, 256);
        Ok(Upstream {
            client,
            grpc,
            http1,
        })
    }

    /// Send and wait for the response head, within `timeout`.
    pub async fn send(
        &self,
        req: Request<Full<Bytes>>,
        timeout: Duration,
    ) -> Result<Response<Incoming>, UpstreamError> {
        let client = if is_grpc(&req) {
            &self.grpc
        } else {
            &self.client
        };
        match tokio::time::timeout(timeout, client.request(req)).await {
            Err(_) => Err(UpstreamError::Timeout(timeout)),
            Ok(Err(e)) => Err(UpstreamError::Unreachable(describe(&e))),
            Ok(Ok(res)) => Ok(res),
        }
    }

    /// Send and read the whole body (at most `limit` bytes), all within `timeout`.
    pub async fn exchange(
        &self,
        req: Request<Full<Bytes>>,
        timeout: Duration,
        limit: usize,
    ) -> Result<(hyper::http::response::Parts, Bytes), UpstreamError> {
        tokio::time::timeout(timeout, self.fetch(req, limit))
            .await
            .unwrap_or(Err(UpstreamError::Timeout(timeout)))
    }

    /// Send and read the whole body (at most `limit` bytes), with no deadline: the caller sets
    /// its own (a create keeps reading past the client's timeout, see `http::detach`).
    pub async fn fetch(
        &self,
        req: Request<Full<Bytes>>,
        limit: usize,
    ) -> Result<(hyper::http::response::Parts, Bytes), UpstreamError> {
        if is_grpc(&req) {
            return self.fetch_grpc(req, limit).await;
        }
        if req.uri().scheme() == Some(&hyper::http::uri::Scheme::HTTP) {
            http1::Http1Pool::reap_in_background(&self.http1);
            return self.http1.fetch(req, limit).await;
        }
        let res = self
            .client
            .request(req)
            .await
            .map_err(|e| UpstreamError::Unreachable(describe(&e)))?;
        let (parts, body) = res.into_parts();
        let body = read_limited(body, limit).await?;
        Ok((parts, body))
    }
}

impl Upstream {
    /// A gRPC call's whole answer: its trailers (the call's status) folded into the head's
    /// headers, where the gRPC form reads a status whether it came as trailers or in a
    /// trailers-only head.
    async fn fetch_grpc(
        &self,
        req: Request<Full<Bytes>>,
        limit: usize,
    ) -> Result<(hyper::http::response::Parts, Bytes), UpstreamError> {
        let res = self
            .grpc
            .request(req)
            .await
            .map_err(|e| UpstreamError::Unreachable(describe(&e)))?;
        let (mut parts, body) = res.into_parts();
        let collected = collect_limited(body, limit).await?;
        if let Some(trailers) = collected.trailers() {
            for (name, value) in trailers {
                parts.headers.insert(name.clone(), value.clone());
            }
        }
        Ok((parts, collected.to_bytes()))
    }
}

/// Collect a body, refusing more than `limit` bytes (checked against Content-Length first when
/// the peer sends one, so an oversized body is refused before it is read).
pub async fn read_limited<B>(body: B, limit: usize) -> Result<Bytes, UpstreamError>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error:
        std::fmt::Display + Send + Sync + 'static + Into<Box<dyn std::error::Error + Send + Sync>>,
{
    collect_limited(body, limit).await.map(|c| c.to_bytes())
}

/// [`read_limited`], its trailers kept.
async fn collect_limited<B>(
    body: B,
    limit: usize,
) -> Result<http_body_util::Collected<Bytes>, UpstreamError>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error:
        std::fmt::Display + Send + Sync + 'static + Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if body.size_hint().lower() > limit as u64 {
        return Err(UpstreamError::TooLarge(limit));
    }
    match Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(UpstreamError::TooLarge(limit)),
        Err(e) => Err(UpstreamError::Unreachable(format!("body: {e}"))),
    }
}

/// An error of the client with all its causes, joined with `: `.
pub fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    msg
}

/// Hop-by-hop headers (RFC 9110 §7.6.1) never cross a proxy.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    HeaderName::from_static("keep-alive"),
];

/// Remove hop-by-hop headers, including every header the `Connection` header names.
pub fn strip_hop_by_hop(h: &mut HeaderMap) {
    let named = connection_named(h);
    for n in named.iter().chain(HOP_BY_HOP.iter()) {
        h.remove(n);
    }
}

/// The headers sent to an agent: the client's end-to-end headers, minus what the gateway owns
/// (Host, Content-Length, Authorization, and Accept-Encoding where the gateway must read the
/// body), plus the forwarding headers (`X-Forwarded-Proto: https` when the client came over
/// TLS) and the request id.
///
/// Built by copying what passes rather than cloning the client's map and removing the rest:
/// one pass, no removals (each a hashed lookup), on every request that reaches an agent.
pub fn upstream_headers(
    client: &HeaderMap,
    client_ip: &HeaderValue,
    https: bool,
    request_id: &HeaderValue,
    gateway_reads_body: bool,
) -> HeaderMap {
    let xff = HeaderName::from_static("x-forwarded-for");
    let xfh = HeaderName::from_static("x-forwarded-host");
    let xfp = HeaderName::from_static("x-forwarded-proto");
    let rid = HeaderName::from_static("x-request-id");
    // Headers the client's `Connection` names are hop-by-hop too (rarely any).
    let named = connection_named(client);
    // Room for the four added here and the few every caller adds (an A2A call adds three, an
    // agent's own credential one) without the map growing.
    let mut h = HeaderMap::with_capacity(client.len() + 9);
    for (name, value) in client {
        let owned = HOP_BY_HOP.contains(name)
            || named.contains(name)
            // The client's credential is for the gateway: an agent gets only its own
            // (`upstream_auth_header`, added by the caller).
            || *name == header::AUTHORIZATION
            // Only the gateway says who is calling (`crate::caller`): a client's own claim
            // never reaches an agent.
            || *name == crate::caller::HEADER
            || *name == header::HOST
            || *name == header::CONTENT_LENGTH
            || (gateway_reads_body && *name == header::ACCEPT_ENCODING)
            || *name == xff
            || *name == xfp
            || *name == rid;
        if !owned {
            h.append(name.clone(), value.clone());
        }
    }
    if gateway_reads_body {
        h.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
    }
    // A chain the client's `Connection` header names is hop-by-hop: not carried on.
    let prior = client.get(&xff).filter(|_| !named.contains(&xff));
    let forwarded = match prior.and_then(|v| v.to_str().ok()) {
        Some(prior) => {
            let ip = client_ip.to_str().unwrap_or("unknown");
            HeaderValue::from_str(&format!("{prior}, {ip}")).ok()
        }
        None => Some(client_ip.clone()),
    };
    if let Some(v) = forwarded {
        h.insert(xff, v);
    }
    h.insert(
        xfp,
        HeaderValue::from_static(if https { "https" } else { "http" }),
    );
    // So an agent that builds absolute URLs (artifact downloads, redirects) can build them for
    // the host the client used rather than its own internal address.
    if let Some(host) = client.get(header::HOST) {
        h.entry(xfh).or_insert_with(|| host.clone());
    }
    h.insert(rid, request_id.clone());
    h
}

/// The header names a `Connection` header lists (hop-by-hop by RFC 9110 §7.6.1).
fn connection_named(h: &HeaderMap) -> Vec<HeaderName> {
    h.get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_and_connection_named_headers_are_removed() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-secret-hop"),
        );
        h.insert("x-secret-hop", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key(header::AUTHORIZATION));
    }

    #[test]
    fn forwarding_headers_are_set_and_appended() {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", HeaderValue::from_static("10.0.0.1"));
        h.insert(header::HOST, HeaderValue::from_static("gw"));
        h.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
        let rid = HeaderValue::from_static("rid-1");
        let out = upstream_headers(
            &h,
            &HeaderValue::from_static("127.0.0.1"),
            false,
            &rid,
            true,
        );
        assert_eq!(out["x-forwarded-for"], "10.0.0.1, 127.0.0.1");
        assert_eq!(out["x-forwarded-proto"], "http");
        let out = upstream_headers(&h, &HeaderValue::from_static("127.0.0.1"), true, &rid, true);
        assert_eq!(out["x-forwarded-proto"], "https");
        assert_eq!(out["x-request-id"], "rid-1");
        assert_eq!(out[header::ACCEPT_ENCODING], "identity");
        assert!(!out.contains_key(header::HOST));
        assert_eq!(out["x-forwarded-host"], "gw");
    }

    #[test]
    fn what_the_gateway_owns_never_reaches_the_agent() {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer k"));
        h.insert("a2a-caller", HeaderValue::from_static("e30.forged.x"));
        h.insert(header::CONNECTION, HeaderValue::from_static("x-hop"));
        h.insert("x-hop", HeaderValue::from_static("1"));
        h.insert(header::TE, HeaderValue::from_static("trailers"));
        h.insert(header::CONTENT_LENGTH, HeaderValue::from_static("3"));
        h.insert("x-request-id", HeaderValue::from_static("client-chosen"));
        h.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        h.insert("x-forwarded-host", HeaderValue::from_static("edge"));
        h.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
        h.append("x-multi", HeaderValue::from_static("a"));
        h.append("x-multi", HeaderValue::from_static("b"));
        let rid = HeaderValue::from_static("rid-2");
        let out = upstream_headers(&h, &HeaderValue::from_static("::1"), false, &rid, false);
        for gone in [
            "authorization",
            "a2a-caller",
            "connection",
            "x-hop",
            "te",
            "content-length",
        ] {
            assert!(!out.contains_key(gone), "{gone} reached the agent");
        }
        assert_eq!(out["x-request-id"], "rid-2");
        assert_eq!(out["x-forwarded-proto"], "http");
        assert_eq!(out["x-forwarded-host"], "edge");
        assert_eq!(out["x-forwarded-for"], "::1");
        // Not read by the gateway: the client's encoding preference stands.
        assert_eq!(out[header::ACCEPT_ENCODING], "gzip");
        let multi: Vec<_> = out.get_all("x-multi").iter().collect();
        assert_eq!(multi, ["a", "b"]);
    }
}
