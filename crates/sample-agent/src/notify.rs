//! Push notifications (spec: when the card has a `notification_config`, POST
//! `{"event_type":"task.status.updated","timestamp":...,"data":Task}` to `endpoint_url` on every
//! status change, with the `auth_header`). One worker delivers them in order from a bounded
//! queue, one attempt each, so a slow or dead receiver never slows the agent's request path.
//! Plain `http://` only: the agent lives on loopback next to the gateway.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use hyper::{Method, Request, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};

use super::state::{iso, now_ms};

/// Deliveries waiting at most; beyond that they are counted as failed and dropped.
pub(crate) const QUEUE: usize = 1024;
/// One delivery attempt may take this long.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Delivery counters, read by the handle.
#[derive(Default)]
pub(crate) struct Stats {
    pub(crate) sent: AtomicUsize,
    pub(crate) failed: AtomicUsize,
}

/// Where the current card says notifications go; parsed once per card.
pub(crate) struct Target {
    /// `None` when `endpoint_url` is missing or not an `http://` URL: deliveries then fail.
    uri: Option<Uri>,
    header: Option<(HeaderName, HeaderValue)>,
}

impl Target {
    /// `None` when the card has no `notification_config`.
    pub(crate) fn from_card(card: &Value) -> Option<Target> {
        let cfg = card.get("notification_config")?;
        let uri = cfg
            .get("endpoint_url")
            .and_then(Value::as_str)
            .and_then(|u| u.parse::<Uri>().ok())
            .filter(|u| u.scheme_str() == Some("http") && u.host().is_some());
        let header = cfg
            .get("auth_header")
            .and_then(Value::as_str)
            .and_then(parse_header);
        Some(Target { uri, header })
    }
}

impl Target {
    /// An official A2A push config's: its `url`, its `token` as `X-A2A-Notification-Token`.
    pub(crate) fn a2a(url: &str, token: Option<&str>) -> Target {
        let uri = url
            .parse::<Uri>()
            .ok()
            .filter(|u| u.scheme_str() == Some("http") && u.host().is_some());
        let header = token.and_then(|t| {
            Some((
                HeaderName::from_static("x-a2a-notification-token"),
                HeaderValue::from_str(t).ok()?,
            ))
        });
        Target { uri, header }
    }
}

/// `"Name: value"` as in the spec's example; a string that is not a header line is taken as
/// the value of `Authorization`.
fn parse_header(line: &str) -> Option<(HeaderName, HeaderValue)> {
    if let Some((name, value)) = line.split_once(':') {
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.trim().as_bytes()),
            HeaderValue::from_str(value.trim()),
        ) {
            return Some((n, v));
        }
    }
    HeaderValue::from_str(line.trim())
        .ok()
        .map(|v| (AUTHORIZATION, v))
}

/// A notification ready to send.
pub(crate) struct Delivery {
    pub(crate) target: Arc<Target>,
    pub(crate) body: Bytes,
}

/// The spec's payload for a task whose status changed.
pub(crate) fn payload(task: &Value) -> Bytes {
    let p = json!({
        "event_type": "task.status.updated",
        "timestamp": iso(now_ms()),
        "data": task,
    });
    Bytes::from(serde_json::to_vec(&p).unwrap_or_default())
}

/// Starts the delivery worker; it ends when the agent stops.
pub(crate) fn spawn_worker(
    mut rx: mpsc::Receiver<Delivery>,
    stats: Arc<Stats>,
    mut stop: watch::Receiver<bool>,
) {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build_http();
    tokio::spawn(async move {
        loop {
            let delivery = tokio::select! {
                d = rx.recv() => d,
                _ = stop.wait_for(|s| *s) => None,
            };
            let Some(delivery) = delivery else { break };
            let ok = tokio::select! {
                ok = deliver(&client, delivery) => ok,
                _ = stop.wait_for(|s| *s) => break,
            };
            let counter = if ok { &stats.sent } else { &stats.failed };
            counter.fetch_add(1, Ordering::Relaxed);
        }
    });
}

async fn deliver<C>(client: &Client<C, Full<Bytes>>, d: Delivery) -> bool
where
    C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
{
    let Some(uri) = d.target.uri.clone() else {
        return false;
    };
    let mut req = Request::new(Full::new(d.body));
    *req.method_mut() = Method::POST;
    *req.uri_mut() = uri;
    let headers = req.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some((name, value)) = &d.target.header {
        headers.insert(name.clone(), value.clone());
    }
    let attempt = async {
        let resp = client.request(req).await.ok()?;
        let ok = resp.status().is_success();
        // Read the (small) answer so the pooled connection can be reused.
        let _ = Limited::new(resp.into_body(), 64 * 1024).collect().await;
        Some(ok)
    };
    matches!(tokio::time::timeout(TIMEOUT, attempt).await, Ok(Some(true)))
}
