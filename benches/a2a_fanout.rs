//! A2A stream fan-out next to Clawpedia's: N subscribers on ONE official A2A task (half
//! `POST tasks/{id}:subscribe`, half JSON-RPC `SubscribeToTask`) and N on ONE Clawpedia task,
//! each through a gateway running as its own process, in one run.
//!
//!     cargo bench --bench a2a_fanout
//!     SUBSCRIBERS=10000 EVENTS=50 RATE=10 GATEWAY_WORKERS=1 PROTOCOLS=a2a,clawpedia \
//!         cargo bench --bench a2a_fanout
//!
//! Per protocol, a fresh gateway (`target/release/a2a-gateway --config FILE`, a child process,
//! `workers = GATEWAY_WORKERS`, default 1) in front of two agents in this process: the sample
//! agent (Clawpedia, `a`) and a minimal official A2A agent (`b`, HTTP+JSON, streaming) whose
//! one stream the bench feeds. The task's first subscriber opens its topic and upstream
//! (Clawpedia: a stream GET; A2A: the creator's `message:stream`); then N plain tokio
//! TcpStreams (on `CLIENT_THREADS` runtime threads, default 1) subscribe over plaintext
//! HTTP/1.1 (the lean path) and read the chunked response, picking out `"text":"t=NS p=P"` in
//! each event's data: the send time in ns since an Instant shared by the pusher and the
//! clients, and the phase.
//!
//! Figures (over N+1 subscribers):
//! - RSS/subscriber: the gateway's VmRSS after the first subscriber has an event, and after all
//!   N are connected and have each received one more event: (after - before) / N. The bound
//!   is 5.1 KB (the Clawpedia stream's target).
//! - delivery: EVENTS events at RATE/s: latency p50/p99/max from emit to arrival, over every
//!   copy; copies lost (a stream that ended before the end marker).
//!
//! Without `--bench` (`cargo test --benches`) one small quick run.

use std::convert::Infallible;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use a2a_sample_agent::{AgentOptions, SampleAgent};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Semaphore};

const PHASE_WARM: usize = 0;
const PHASE_SYNC: usize = 1;
const PHASE_PACED: usize = 2;
const PHASE_END: usize = 9;

static EPOCH: OnceLock<Instant> = OnceLock::new();

fn now_ns() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Protocol {
    Clawpedia,
    A2a,
}

/// How one subscriber subscribes.
#[derive(Clone, Copy)]
enum Form {
    /// `GET /agents/a/tasks/{id}/stream`.
    ClawpediaGet,
    /// `POST /agents/b/tasks/{id}:subscribe`.
    A2aRest,
    /// JSON-RPC `SubscribeToTask` at `/agents/b/jsonrpc`, with this id.
    A2aRpc(usize),
    /// The creator's `POST /agents/b/message:stream`.
    A2aCreate,
}

fn request(form: Form, task: &str) -> String {
    let post = |path: &str, body: &str| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nA2A-Version: 1.0\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    match form {
        Form::ClawpediaGet => {
            format!("GET /agents/a/tasks/{task}/stream HTTP/1.1\r\nHost: x\r\n\r\n")
        }
        Form::A2aRest => post(&format!("/agents/b/tasks/{task}:subscribe"), ""),
        Form::A2aRpc(id) => post(
            "/agents/b/jsonrpc",
            &format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"SubscribeToTask","params":{{"id":"{task}"}}}}"#
            ),
        ),
        Form::A2aCreate => post(
            "/agents/b/message:stream",
            r#"{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"go"}]}}"#,
        ),
    }
}

struct Shared {
    received: [AtomicU64; 3],
    heads: AtomicUsize,
    refused: AtomicUsize,
}

#[derive(Default)]
struct ClientResult {
    paced: Vec<u64>,
    ended_early: bool,
}

/// `"text":"t=NS p=P` anywhere in a line (a Clawpedia event's data, an A2A artifact's text
/// in either framing): (t, phase).
fn parse_line(line: &[u8]) -> Option<(u64, usize)> {
    const MARK: &[u8] = b"\"text\":\"t=";
    let at = line.windows(MARK.len()).position(|w| w == MARK)? + MARK.len();
    let rest = &line[at..];
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    let t = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
    let p = *rest[digits..].strip_prefix(b" p=")?.first()?;
    p.is_ascii_digit().then_some((t, usize::from(p - b'0')))
}

/// One subscriber: connect, send its request, read the head, then time every event until the
/// end marker.
async fn client(
    addr: SocketAddr,
    req: String,
    shared: Arc<Shared>,
    gate: Option<Arc<Semaphore>>,
) -> ClientResult {
    let permit = match &gate {
        Some(g) => Some(g.clone().acquire_owned().await.expect("gate")),
        None => None,
    };
    let refused = |shared: &Shared| {
        shared.refused.fetch_add(1, Ordering::AcqRel);
        ClientResult {
            ended_early: true,
            ..ClientResult::default()
        }
    };
    let Ok(mut s) = TcpStream::connect(addr).await else {
        return refused(&shared);
    };
    if s.write_all(req.as_bytes()).await.is_err() {
        return refused(&shared);
    }
    drop(req);
    let mut buf = vec![0u8; 4096];
    let mut len = 0;
    loop {
        match s.read(&mut buf[len..]).await {
            Ok(0) | Err(_) => return refused(&shared),
            Ok(n) => len += n,
        }
        if let Some(end) = buf[..len].windows(4).position(|w| w == b"\r\n\r\n") {
            if !buf.starts_with(b"HTTP/1.1 200") {
                eprintln!(
                    "a2a_fanout: refused: {}",
                    String::from_utf8_lossy(&buf[..len.min(400)])
                );
                return refused(&shared);
            }
            buf.copy_within(end + 4..len, 0);
            len -= end + 4;
            break;
        }
        if len == buf.len() {
            return refused(&shared);
        }
    }
    drop(permit);
    shared.heads.fetch_add(1, Ordering::AcqRel);
    let mut res = ClientResult::default();
    let mut fresh = len > 0;
    loop {
        if !fresh {
            match s.read(&mut buf[len..]).await {
                Ok(0) | Err(_) => {
                    res.ended_early = true;
                    return res;
                }
                Ok(n) => len += n,
            }
        }
        fresh = false;
        let at = now_ns();
        let mut start = 0;
        while let Some(i) = buf[start..len].iter().position(|&b| b == b'\n') {
            if let Some((t, phase)) = parse_line(&buf[start..start + i]) {
                if phase == PHASE_END {
                    return res;
                }
                if phase == PHASE_PACED {
                    res.paced.push(at.saturating_sub(t));
                }
                if let Some(r) = shared.received.get(phase) {
                    r.fetch_add(1, Ordering::AcqRel);
                }
            }
            start += i + 1;
        }
        buf.copy_within(start..len, 0);
        len -= start;
        if len == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
    }
}

/// A minimal official A2A agent: a card naming one HTTP+JSON interface, streaming; its one
/// `message:stream` answered with the task, then whatever the bench sends.
struct A2aAgent {
    base: String,
    feed: Arc<Mutex<Option<mpsc::Sender<Bytes>>>>,
}

struct Fed(mpsc::Receiver<Bytes>);

impl hyper::body::Body for Fed {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|o| o.map(|b| Ok(hyper::body::Frame::data(b))))
    }
}

type Out = http_body_util::combinators::BoxBody<Bytes, Infallible>;

const A2A_TASK: &str = "t-1";

impl A2aAgent {
    async fn start() -> A2aAgent {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let feed: Arc<Mutex<Option<mpsc::Sender<Bytes>>>> = Arc::default();
        let (card_base, slot) = (base.clone(), feed.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (card_base, slot) = (card_base.clone(), slot.clone());
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let (card_base, slot) = (card_base.clone(), slot.clone());
                        async move { Ok::<_, Infallible>(answer(req, &card_base, &slot).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        A2aAgent { base, feed }
    }

    /// Send one artifact update carrying `t=NS p=PHASE` on the task's stream.
    async fn push(&self, phase: usize) {
        let sender = self.feed.lock().expect("lock").clone();
        let Some(tx) = sender else { return };
        let event = format!(
            "data: {{\"artifactUpdate\":{{\"taskId\":\"{A2A_TASK}\",\"contextId\":\"c-1\",\
             \"artifact\":{{\"artifactId\":\"a\",\"parts\":[{{\"text\":\"t={} p={phase}\"}}]}}}}}}\n\n",
            now_ns()
        );
        let _ = tx.send(Bytes::from(event)).await;
    }
}

async fn answer(
    req: hyper::Request<hyper::body::Incoming>,
    base: &str,
    slot: &Mutex<Option<mpsc::Sender<Bytes>>>,
) -> hyper::Response<Out> {
    let path = req.uri().path().to_owned();
    let _ = req.into_body().collect().await;
    let full = |s: u16, b: String| {
        let mut r = hyper::Response::new(Full::new(Bytes::from(b)).boxed());
        *r.status_mut() = hyper::StatusCode::from_u16(s).unwrap_or(hyper::StatusCode::OK);
        r
    };
    match path.as_str() {
        "/.well-known/agent-card.json" => full(
            200,
            serde_json::json!({
                "name": "Fan-out", "description": "one stream, fed by the bench", "version": "1.0.0",
                "supportedInterfaces": [{"url": format!("{base}/rest"), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}],
                "capabilities": {"streaming": true, "pushNotifications": false},
                "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
                "skills": [{"id": "s", "name": "S", "description": "streams", "tags": []}]
            })
            .to_string(),
        ),
        "/rest/message:stream" => {
            let (tx, rx) = mpsc::channel(1024);
            let first = format!(
                "data: {{\"task\":{{\"id\":\"{A2A_TASK}\",\"contextId\":\"c-1\",\"status\":{{\"state\":\"TASK_STATE_WORKING\"}}}}}}\n\n"
            );
            let _ = tx.send(Bytes::from(first)).await;
            *slot.lock().expect("lock") = Some(tx);
            let mut r = hyper::Response::new(Fed(rx).boxed());
            r.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("text/event-stream"),
            );
            r
        }
        _ => full(404, "{}".to_owned()),
    }
}

/// The gateway process, killed when dropped.
struct Gateway {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Gateway {
    fn spawn(clawpedia: &str, a2a: &str, workers: usize) -> Gateway {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("gateway.toml");
        let config = format!(
            "listen = \"127.0.0.1:0\"\n\
             workers = {workers}\n\
             max_connections = 19000\n\
             [streams]\n\
             ping_interval_ms = 3600000\n\
             replay_events = 1000\n\
             subscriber_lag_bytes = 1048576\n\
             [[agents]]\n\
             name = \"a\"\n\
             url = \"{clawpedia}\"\n\
             [[agents]]\n\
             name = \"b\"\n\
             url = \"{a2a}\"\n\
             protocol = \"a2a\"\n"
        );
        std::fs::write(&path, config).expect("write config");
        let bin = std::env::var_os("A2A_GATEWAY_BIN")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_a2a-gateway").into());
        let mut child = Command::new(bin)
            .arg("--config")
            .arg(&path)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("gateway binary starts");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(addr) = line.trim().strip_prefix("listening on http://") {
                    let _ = tx.send(addr.to_owned());
                }
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("`listening on` line")
            .parse()
            .expect("address");
        Gateway {
            child,
            addr,
            _dir: dir,
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// One request on its own connection: (status, body).
async fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let Ok(mut s) = TcpStream::connect(addr).await else {
        return (0, String::new());
    };
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    if s.write_all(req.as_bytes()).await.is_err() {
        return (0, String::new());
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_owned());
    (status, body)
}

async fn wait_count(shared: &Shared, phase: usize, n: u64, what: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    while shared.received[phase].load(Ordering::Acquire) < n {
        if Instant::now() > deadline {
            eprintln!(
                "a2a_fanout: timed out waiting for {what}: {} of {n}",
                shared.received[phase].load(Ordering::Acquire)
            );
            return false;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    true
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i] as f64 / 1e6
}

struct Opts {
    subscribers: usize,
    events: u64,
    rate: f64,
    workers: usize,
}

/// Push one event of `phase` on the protocol's task.
async fn push(p: Protocol, clawpedia: &SampleAgent, task: &str, a2a: &A2aAgent, phase: usize) {
    match p {
        Protocol::Clawpedia => {
            let data = format!("{{\"text\":\"t={} p={phase}\"}}", now_ns());
            clawpedia.push_event(task, "tick", &data);
        }
        Protocol::A2a => a2a.push(phase).await,
    }
}

async fn scenario(p: Protocol, o: &Opts) {
    let n = o.subscribers;
    let clawpedia = SampleAgent::start(AgentOptions {
        record_capacity: 0,
        ..AgentOptions::default()
    })
    .await
    .expect("agent");
    let a2a = A2aAgent::start().await;
    let gw = Gateway::spawn(&clawpedia.base_url(), &a2a.base, o.workers);
    let deadline = Instant::now() + Duration::from_secs(20);
    while http(gw.addr, "GET", "/readyz", "").await.0 != 200 {
        assert!(Instant::now() < deadline, "gateway ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let task = match p {
        Protocol::A2a => A2A_TASK.to_owned(),
        Protocol::Clawpedia => {
            let (status, body) = http(
                gw.addr,
                "POST",
                "/agents/a/tasks",
                r#"{"input": {"topic": "x", "filename": "a.py"}}"#,
            )
            .await;
            assert!((200..300).contains(&status), "task: {status} {body}");
            let json = &body[body.find('{').unwrap_or(0)..=body.rfind('}').unwrap_or(0)];
            let doc: serde_json::Value = serde_json::from_str(json).expect("task JSON");
            doc["task_id"].as_str().expect("task_id").to_owned()
        }
    };
    let shared = Arc::new(Shared {
        received: Default::default(),
        heads: AtomicUsize::new(0),
        refused: AtomicUsize::new(0),
    });
    let first = match p {
        Protocol::A2a => Form::A2aCreate,
        Protocol::Clawpedia => Form::ClawpediaGet,
    };
    let mut clients = vec![tokio::spawn(client(
        gw.addr,
        request(first, &task),
        shared.clone(),
        None,
    ))];
    while shared.heads.load(Ordering::Acquire) == 0 {
        assert_eq!(shared.refused.load(Ordering::Acquire), 0, "first stream");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    push(p, &clawpedia, &task, &a2a, PHASE_WARM).await;
    assert!(wait_count(&shared, PHASE_WARM, 1, "the warm-up event").await);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let pid = gw.child.id();
    let before = rss(pid);
    let gate = Arc::new(Semaphore::new(256));
    let started = Instant::now();
    for i in 0..n {
        let form = match p {
            Protocol::Clawpedia => Form::ClawpediaGet,
            Protocol::A2a if i % 2 == 0 => Form::A2aRest,
            Protocol::A2a => Form::A2aRpc(i),
        };
        clients.push(tokio::spawn(client(
            gw.addr,
            request(form, &task),
            shared.clone(),
            Some(gate.clone()),
        )));
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while shared.heads.load(Ordering::Acquire) + shared.refused.load(Ordering::Acquire) < n + 1 {
        assert!(Instant::now() < deadline, "subscribers connected");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let connected = started.elapsed();
    let refused = shared.refused.load(Ordering::Acquire);
    push(p, &clawpedia, &task, &a2a, PHASE_SYNC).await;
    let synced = wait_count(
        &shared,
        PHASE_SYNC,
        (n + 1 - refused) as u64,
        "the sync event",
    )
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = rss(pid);
    let per = after.saturating_sub(before) as f64 / n as f64;
    // Paced.
    let every = Duration::from_secs_f64(1.0 / o.rate.max(0.1));
    let mut tick = tokio::time::interval(every);
    for _ in 0..o.events {
        tick.tick().await;
        push(p, &clawpedia, &task, &a2a, PHASE_PACED).await;
    }
    let want = o.events * (n + 1 - refused) as u64;
    let delivered = wait_count(&shared, PHASE_PACED, want, "the paced events").await;
    push(p, &clawpedia, &task, &a2a, PHASE_END).await;
    let mut lat = Vec::new();
    let mut early = 0;
    for c in clients {
        let r = tokio::time::timeout(Duration::from_secs(30), c)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or(ClientResult {
                ended_early: true,
                ..ClientResult::default()
            });
        early += usize::from(r.ended_early);
        lat.extend(r.paced);
    }
    lat.sort_unstable();
    println!(
        "{p:?}: N={n} connected in {:.1}s, refused {refused}; RSS/subscriber {per:.0} B \
         ({:.1} MiB -> {:.1} MiB){}; delivery of {} events at {}/s to {} subscribers: \
         p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms, copies {}/{want}{}; ended early {early}",
        connected.as_secs_f64(),
        before as f64 / 1048576.0,
        after as f64 / 1048576.0,
        if synced { "" } else { " (sync incomplete)" },
        o.events,
        o.rate,
        n + 1,
        pct(&lat, 0.5),
        pct(&lat, 0.99),
        pct(&lat, 1.0),
        lat.len(),
        if delivered { "" } else { " (incomplete)" },
    );
    drop(gw);
}

fn main() {
    EPOCH.get_or_init(Instant::now);
    let quick = !std::env::args().any(|a| a == "--bench");
    let mut o = Opts {
        subscribers: env_or("SUBSCRIBERS", 10_000),
        events: env_or("EVENTS", 50),
        rate: env_or("RATE", 10.0),
        workers: env_or("GATEWAY_WORKERS", 1),
    };
    if quick {
        o.subscribers = 20;
        o.events = 3;
        o.rate = 20.0;
    }
    let protocols: Vec<Protocol> = std::env::var("PROTOCOLS")
        .unwrap_or_else(|_| "a2a,clawpedia".into())
        .split(',')
        .filter_map(|p| match p.trim() {
            "a2a" => Some(Protocol::A2a),
            "clawpedia" => Some(Protocol::Clawpedia),
            _ => None,
        })
        .collect();
    let threads = env_or("CLIENT_THREADS", 1usize).max(1);
    println!(
        "{}rerun: SUBSCRIBERS={} EVENTS={} RATE={} GATEWAY_WORKERS={} CLIENT_THREADS={threads} \
         PROTOCOLS={} cargo bench --bench a2a_fanout",
        if quick {
            "quick mode (no --bench); "
        } else {
            ""
        },
        o.subscribers,
        o.events,
        o.rate,
        o.workers,
        protocols
            .iter()
            .map(|p| if *p == Protocol::A2a {
                "a2a"
            } else {
                "clawpedia"
            })
            .collect::<Vec<_>>()
            .join(","),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        tokio::spawn(async move {
            for p in protocols {
                scenario(p, &o).await;
            }
        })
        .await
        .expect("scenarios");
    });
}
