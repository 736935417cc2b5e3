//! A webhook subscriber for tests: a real HTTP server on loopback that records every delivery
//! and answers as scripted (a status per request, a delay), and that can be stopped (connection
//! refused) and started again on the same port.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_gateway::webhook::sign::{verify, SigningKey};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::HeaderMap;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;

#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Bytes,
    pub at: Instant,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("delivery body is JSON")
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    pub fn msg_id(&self) -> String {
        self.header("webhook-id").expect("webhook-id").to_owned()
    }
    /// (task_id, status) of the delivered notification.
    pub fn change(&self) -> (String, String) {
        let j = self.json();
        (
            j["data"]["task_id"].as_str().expect("task_id").to_owned(),
            j["data"]["status"].as_str().expect("status").to_owned(),
        )
    }
    /// Check the Standard Webhooks signature with `secret`, as a receiver would.
    pub fn verify(&self, secret: &str) -> Result<(), String> {
        let secret = SigningKey::parse(secret).map_err(|e| e.to_string())?;
        let ts: i64 = self
            .header("webhook-timestamp")
            .ok_or("no webhook-timestamp")?
            .parse()
            .map_err(|_| "bad timestamp")?;
        let now = chrono::Utc::now().timestamp();
        verify(
            &secret,
            &self.msg_id(),
            ts,
            &self.body,
            self.header("webhook-signature").ok_or("no signature")?,
            now,
            300,
        )
        .map_err(|e| e.to_string())
    }
}

#[derive(Default)]
struct Script {
    /// One-shot answers, used first: (status, retry-after).
    next: VecDeque<(u16, Option<String>)>,
    /// The answer when no one-shot is left.
    status: u16,
    delay: Duration,
}

#[derive(Default)]
struct Shared {
    received: Mutex<Vec<Received>>,
    /// Every request, including the ones answered with an error status.
    attempts: Mutex<usize>,
    script: Mutex<Script>,
}

pub struct Hook {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl Hook {
    pub async fn start() -> Hook {
        Hook::start_on(SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Start on `addr` (port 0 for a free one), retrying briefly while a just-closed port frees.
    pub async fn start_on(addr: SocketAddr) -> Hook {
        let shared = Arc::new(Shared::default());
        shared.script.lock().expect("lock").status = 200;
        Hook::serve(addr, shared).await
    }

    async fn serve(addr: SocketAddr, shared: Arc<Shared>) -> Hook {
        let deadline = Instant::now() + Duration::from_secs(5);
        let listener = loop {
            match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => break l,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("hook cannot bind {addr}: {e}"),
            }
        };
        let addr = listener.local_addr().expect("addr");
        let s = shared.clone();
        let server = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let s = s.clone();
                conns.spawn(async move {
                    let svc = hyper::service::service_fn(move |req| handle(s.clone(), req));
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
                while conns.try_join_next().is_some() {}
            }
        });
        Hook {
            addr,
            shared,
            server: Some(server),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    /// Stop listening and drop every connection: deliveries get connection refused.
    pub async fn stop(&mut self) {
        if let Some(s) = self.server.take() {
            s.abort();
            let _ = s.await;
        }
    }

    /// Listen again on the same port, keeping what was received.
    pub async fn restart(&mut self) {
        self.stop().await;
        let again = Hook::serve(self.addr, self.shared.clone()).await;
        self.server = again.into_server();
    }

    fn into_server(mut self) -> Option<tokio::task::JoinHandle<()>> {
        self.server.take()
    }

    pub fn set_status(&self, status: u16) {
        self.shared.script.lock().expect("lock").status = status;
    }

    pub fn set_delay(&self, delay: Duration) {
        self.shared.script.lock().expect("lock").delay = delay;
    }

    /// Answer the next request with `status` (and a Retry-After), then carry on.
    pub fn answer_next(&self, status: u16, retry_after: Option<&str>) {
        self.shared
            .script
            .lock()
            .expect("lock")
            .next
            .push_back((status, retry_after.map(str::to_owned)));
    }

    /// Deliveries answered 2xx, in the order they arrived.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().expect("lock").clone()
    }

    /// Every (task, status) delivered so far.
    pub fn changes(&self) -> std::collections::HashSet<(String, String)> {
        self.received().iter().map(|d| d.change()).collect()
    }

    /// Each task's statuses in the order they arrived, a repeat (what at-least-once delivery
    /// allows after a takeover) counted once.
    pub fn lanes(&self) -> std::collections::HashMap<String, Vec<String>> {
        let mut out = std::collections::HashMap::<String, Vec<String>>::new();
        for d in self.received() {
            let (t, s) = d.change();
            let lane = out.entry(t).or_default();
            if !lane.contains(&s) {
                lane.push(s);
            }
        }
        out
    }

    pub fn count(&self) -> usize {
        self.shared.received.lock().expect("lock").len()
    }

    pub fn attempts(&self) -> usize {
        *self.shared.attempts.lock().expect("lock")
    }
}

impl Drop for Hook {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.abort();
        }
    }
}

async fn handle(
    s: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let (status, retry_after, delay) = {
        let mut sc = s.script.lock().expect("lock");
        let (st, ra) = sc.next.pop_front().unwrap_or((sc.status, None));
        (st, ra, sc.delay)
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    *s.attempts.lock().expect("lock") += 1;
    if (200..300).contains(&status) {
        s.received.lock().expect("lock").push(Received {
            headers: parts.headers,
            body,
            at: Instant::now(),
        });
    }
    let mut res = Response::builder().status(status);
    if let Some(ra) = retry_after {
        res = res.header("retry-after", ra);
    }
    if (300..400).contains(&status) {
        res = res.header("location", "http://127.0.0.1:1/elsewhere");
    }
    Ok(res.body(Full::new(Bytes::new())).expect("response"))
}
