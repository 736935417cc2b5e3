//! One delivery attempt: POST the payload to the subscriber, signed, through the URL guard.
//!
//! The connector's resolver is the guard itself ([`GuardedResolver`]): the addresses it checks
//! are the only ones the connector is given, so a name cannot pass the check with one address
//! and be connected to at another (DNS rebinding). Literal IP hosts skip resolvers in hyper, so
//! they are checked when the config is loaded (`UrlGuard::check_url`). Redirects are never
//! followed (hyper does not), and a 3xx counts as a failure.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;

use super::guard::{GuardError, UrlGuard};
use super::queue::Message;
use super::retry::parse_retry_after;
use super::sign;
use crate::config::{SubscriberConfig, WebhookConfig};
use crate::protocol::a2a::push::PushConfig;
use crate::telemetry::Trace;

/// hyper-util's resolver hook, answered by the URL guard.
#[derive(Clone)]
pub struct GuardedResolver {
    guard: Arc<UrlGuard>,
}

impl tower_service::Service<Name> for GuardedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = GuardError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, GuardError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), GuardError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let guard = self.guard.clone();
        Box::pin(async move {
            // Port 0: the connector puts the URL's port on every address it is given.
            Ok(guard.resolve_host(name.as_str(), 0).await?.into_iter())
        })
    }
}

type WebhookClient = Client<HttpsConnector<HttpConnector<GuardedResolver>>, Full<Bytes>>;

/// A subscriber ready to deliver to.
pub struct Subscriber {
    /// The subscriber as configured.
    pub cfg: SubscriberConfig,
    /// Its URL, checked by the guard when the sender was built.
    pub uri: Uri,
    /// `cfg.secret`, decoded: every delivery is signed with each (several during a rotation).
    pub keys: Vec<sign::SigningKey>,
}

/// What one attempt got.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// The response status; `None` for a timeout or a connection error.
    pub status: Option<u16>,
    /// The subscriber's `Retry-After`, if it sent one that parses.
    pub retry_after: Option<Duration>,
    /// For logs and dead letters: `HTTP 503`, `timeout after 15 s`, the connection error.
    pub summary: String,
    /// A metrics label: `2xx`, `3xx`, `4xx`, `5xx`, `timeout`, `error`.
    pub class: &'static str,
}

/// Delivers to the configured subscribers: one pooled client whose connector resolves through the
/// URL guard.
pub struct Sender {
    client: WebhookClient,
    subscribers: HashMap<Arc<str>, Arc<Subscriber>>,
    timeout: Duration,
    /// The guard of `webhooks.allow`, for the URLs of A2A push configs (checked when stored,
    /// and again at each attempt: a reload may have narrowed the allow list since).
    guard: Arc<UrlGuard>,
}

/// Responses are not read beyond this (enough to keep the connection reusable for small
/// answers; a larger one is dropped with its connection).
const DRAIN_LIMIT: usize = 64 * 1024;

/// Why the webhook sender could not be built: a subscriber the guard or its keys refuse.
#[derive(Debug, thiserror::Error)]
pub enum SenderError {
    /// `webhooks.allow` holds an entry that is no address range.
    #[error("webhooks.allow: {0}")]
    Allow(GuardError),
    /// A subscriber's URL is refused by the guard.
    #[error("{subscriber}: {source}")]
    Url {
        /// The subscriber's name.
        subscriber: String,
        /// Why the guard refuses it.
        source: GuardError,
    },
    /// A subscriber's signing key cannot be read.
    #[error("{subscriber}: {source}")]
    Key {
        /// The subscriber's name.
        subscriber: String,
        /// Why the key cannot be read.
        source: sign::SecretError,
    },
    /// The HTTP client could not be built.
    #[error(transparent)]
    Client(#[from] crate::upstream::ClientError),
}

impl Sender {
    /// Check every subscriber URL with the guard of `webhooks.allow` and build the client; an error
    /// names the subscriber.
    pub fn new(subs: &[SubscriberConfig], cfg: &WebhookConfig) -> Result<Sender, SenderError> {
        let guard = Arc::new(UrlGuard::new(&cfg.allow).map_err(SenderError::Allow)?);
        let mut subscribers = HashMap::new();
        for s in subs {
            let uri = guard.check_url(&s.url).map_err(|source| SenderError::Url {
                subscriber: s.name.clone(),
                source,
            })?;
            let keys = s
                .secret
                .iter()
                .map(|k| sign::SigningKey::parse(k.expose()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|source| SenderError::Key {
                    subscriber: s.name.clone(),
                    source,
                })?;
            subscribers.insert(
                Arc::from(s.name.as_str()),
                Arc::new(Subscriber {
                    cfg: s.clone(),
                    uri,
                    keys,
                }),
            );
        }
        let mut http = HttpConnector::new_with_resolver(GuardedResolver {
            guard: guard.clone(),
        });
        http.set_nodelay(true);
        http.set_connect_timeout(Some(cfg.timeout.min(Duration::from_secs(10))));
        http.enforce_http(false);
        let client = crate::upstream::pooled_client(
            http,
            Duration::from_secs(60),
            cfg.concurrency.min(1024),
        )?;
        Ok(Sender {
            client,
            subscribers,
            timeout: cfg.timeout,
            guard,
        })
    }

    /// A configured subscriber, by name.
    pub fn subscriber(&self, name: &str) -> Option<&Arc<Subscriber>> {
        self.subscribers.get(name)
    }

    /// Every configured subscriber.
    pub fn subscribers(&self) -> impl Iterator<Item = &Arc<Subscriber>> {
        self.subscribers.values()
    }

    /// Make one attempt, bounded by the configured timeout from connect to the end of the
    /// (drained) response.
    /// `trace`: the attempt's span, whose context the subscriber gets as `traceparent`.
    pub async fn send(&self, sub: &Subscriber, msg: &Message, trace: Option<&Trace>) -> Attempt {
        let now = SystemTime::now();
        let ts = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(sub.uri.clone())
            .header(header::CONTENT_TYPE, "application/json")
            .header(
                header::USER_AGENT,
                concat!("a2a-gateway/", env!("CARGO_PKG_VERSION")),
            );
        match sign::headers(&sub.keys, &msg.msg_id, ts, &msg.payload) {
            Ok(hs) => {
                for (k, v) in hs {
                    req = req.header(k, v);
                }
            }
            Err(e) => return failed(format!("cannot sign: {e}")),
        }
        if let Some((name, value)) = &sub.cfg.auth_header {
            match HeaderValue::from_str(value.expose()) {
                Ok(mut v) => {
                    v.set_sensitive(true);
                    req = req.header(name, v);
                }
                Err(_) => return failed("auth_header is not a valid header value".into()),
            }
        }
        self.post(req, msg, trace, now).await
    }

    /// Make one attempt at an A2A push config: the StreamResponse as `application/a2a+json`
    /// (for a config a 0.3 client made, 0.3's bare object of a2a.json, as `application/json`),
    /// with the config's `X-A2A-Notification-Token` and `Authorization: {scheme} {credentials}`
    /// (as a2a-sdk's receivers read them), and `webhook-id` and `webhook-timestamp` (the same
    /// id on every retry) so a receiver can drop duplicates. The URL is checked by the guard
    /// again, and its names resolved only through it.
    pub async fn send_push(
        &self,
        cfg: &PushConfig,
        msg: &Message,
        trace: Option<&Trace>,
    ) -> Attempt {
        let now = SystemTime::now();
        let ts = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let uri = match self.guard.check_url(&cfg.url) {
            Ok(u) => u,
            Err(e) => return failed(format!("push config url refused: {e}")),
        };
        let mut req = Request::builder().method(Method::POST).uri(uri);
        let v0_3 = cfg.version.as_deref() == Some(crate::protocol::a2a::v0_3::VERSION);
        let translated;
        let msg = if v0_3 {
            translated = Message {
                payload: in_v0_3(&msg.payload),
                ..msg.clone()
            };
            &translated
        } else {
            msg
        };
        req = req
            .header(
                header::CONTENT_TYPE,
                if v0_3 {
                    "application/json"
                } else {
                    "application/a2a+json"
                },
            )
            .header(
                header::USER_AGENT,
                concat!("a2a-gateway/", env!("CARGO_PKG_VERSION")),
            );
        match sign::headers(&[], &msg.msg_id, ts, &msg.payload) {
            Ok(hs) => {
                for (k, v) in hs {
                    req = req.header(k, v);
                }
            }
            Err(e) => return failed(format!("cannot sign: {e}")),
        }
        let secret = |v: &str| {
            HeaderValue::from_str(v).map(|mut v| {
                v.set_sensitive(true);
                v
            })
        };
        if let Some(t) = &cfg.token {
            match secret(t) {
                Ok(v) => req = req.header("x-a2a-notification-token", v),
                Err(_) => return failed("the config's token is not a header value".into()),
            }
        }
        if let Some(a) = cfg.authorization() {
            match secret(&a) {
                Ok(v) => req = req.header(header::AUTHORIZATION, v),
                Err(_) => {
                    return failed("the config's authentication is not a header value".into())
                }
            }
        }
        self.post(req, msg, trace, now).await
    }

    /// Send `req` with the message's payload, bounded by the timeout from connect to the end
    /// of the (drained) response.
    async fn post(
        &self,
        req: hyper::http::request::Builder,
        msg: &Message,
        trace: Option<&Trace>,
        now: SystemTime,
    ) -> Attempt {
        let mut req = match req.body(Full::new(msg.payload.clone())) {
            Ok(r) => r,
            Err(e) => return failed(format!("cannot build request: {e}")),
        };
        if let Some(t) = trace {
            t.inject(req.headers_mut());
        }
        let exchange = async {
            let res = self.client.request(req).await?;
            let status = res.status().as_u16();
            let retry_after = res
                .headers()
                .get(header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| parse_retry_after(v, now));
            // Drain a small answer so the connection goes back to the pool; ignore its errors.
            let _ = Limited::new(res.into_body(), DRAIN_LIMIT).collect().await;
            Ok::<_, hyper_util::client::legacy::Error>((status, retry_after))
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Err(_) => Attempt {
                status: None,
                retry_after: None,
                summary: format!("timeout after {} ms", self.timeout.as_millis()),
                class: "timeout",
            },
            Ok(Err(e)) => failed(crate::upstream::describe(&e)),
            Ok(Ok((status, retry_after))) => Attempt {
                status: Some(status),
                retry_after,
                summary: format!("HTTP {status}"),
                class: match status {
                    200..=299 => "2xx",
                    300..=399 => "3xx",
                    400..=499 => "4xx",
                    _ => "5xx",
                },
            },
        }
    }
}

fn failed(summary: String) -> Attempt {
    Attempt {
        status: None,
        retry_after: None,
        summary,
        class: "error",
    }
}

/// A delivery's StreamResponse as a 0.3 receiver reads it: the bare object of a2a.json with its
/// `kind` (`protocol::a2a::v0_3`); bytes that are no JSON go as they are.
fn in_v0_3(payload: &Bytes) -> Bytes {
    match serde_json::from_slice::<serde_json::Value>(payload) {
        Ok(v) => {
            let bare = crate::protocol::a2a::v0_3::model::event_out(
                crate::protocol::a2a::v0_3::model::Style::Json,
                v,
            );
            Bytes::from(serde_json::to_vec(&bare).unwrap_or_default())
        }
        Err(_) => payload.clone(),
    }
}
