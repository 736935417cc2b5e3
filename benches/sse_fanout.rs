//! SSE fan-out: N subscribers on ONE task's stream, through a gateway running as its own process.
//!
//!     cargo bench --bench sse_fanout
//!     SUBSCRIBERS=100,1000,10000 GATEWAY_WORKERS=1 SATURATE_SECS=5 RATE=20 PACED_SECS=5 \
//!         ROUTE=agent|agentless cargo bench --bench sse_fanout
//!
//! Per N: a sample agent (in this process) with one task created through the gateway
//! (`target/release/a2a-gateway --config FILE`, a child process, `workers = GATEWAY_WORKERS`,
//! default 1). One warm-up subscriber opens the task's topic and upstream; then N more plain
//! tokio TcpStreams (in this process, on `CLIENT_THREADS` runtime threads, default 1) send
//! `GET /agents/a/tasks/{id}/stream` (`ROUTE=agentless`: `GET /tasks/{id}/stream`) and read the chunked response, picking out `data: ` lines.
//! Each event's data carries its send time (ns since an Instant shared by the agent's pusher and
//! the clients), taken just before `SampleAgent::push_event`; a client stamps each read once.
//!
//! Figures (all over N+1 subscribers, the warm-up one included):
//! - RSS/subscriber: the gateway's VmRSS after the warm-up subscriber has an event, and after
//!   all N are connected and have each received one more event: (after - before) / N.
//! - paced: a fixed rate for PACED_SECS (default 5): PACED_COPIES copies/s (default 20000, so
//!   20000/(N+1) events/s, between 1 and 1000), or RATE events/s if set: fan-out latency
//!   p50/p99/max, emit to arrival, over every copy.
//! - saturated: the agent emits as fast as the pipeline takes them, with at most WINDOW events
//!   (default max(4, min(128, 65536/N)), at most 200: the sample agent drops a stream 256 events
//!   behind) not yet received by every subscriber, for
//!   SATURATE_SECS (default 5): copies/s delivered, events/s, latency p50/p99 (which includes
//!   waiting behind the window), and the gateway's CPU time per copy (utime+stime from
//!   /proc/PID/stat), so a client-bound run still tells what the gateway spent.
//!
//! Gateway and clients share the machine's cores: the bench prints its own CPU use too.
//! `A2A_GATEWAY_BIN=PATH` runs another gateway binary (an older commit's, say) under the same
//! client; `benches/compare.sh` alternates two builds that way.
//! Without `--bench` (`cargo test --benches`) one small quick run.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use a2a_sample_agent::{AgentOptions, SampleAgent};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Notify, Semaphore};

const PHASE_WARM: usize = 0;
const PHASE_SYNC: usize = 1;
const PHASE_PACED: usize = 2;
const PHASE_SATURATED: usize = 3;
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

struct Opts {
    subscribers: Vec<usize>,
    gateway_workers: usize,
    /// Events/s of the paced phase; `None`: `paced_copies / (N+1)`.
    rate: Option<f64>,
    paced_copies: f64,
    paced: Duration,
    saturate: Duration,
    window: Option<u64>,
    pad: usize,
    route: StreamRoute,
}

/// Which stream route the subscribers take (`ROUTE=agent`, the default, or `ROUTE=agentless`).
#[derive(Clone, Copy)]
enum StreamRoute {
    /// `/agents/a/tasks/{id}/stream`.
    Agent,
    /// `/tasks/{id}/stream`: the ledger finds the agent.
    Agentless,
}

/// What every client reports to, and the saturated phase's pusher waits on.
struct Shared {
    /// Copies received, per phase.
    received: [AtomicU64; 4],
    /// Response heads read (200) and refused connections.
    heads: AtomicUsize,
    refused: AtomicUsize,
    /// The pusher is woken when `received[PHASE_SATURATED]` reaches this.
    target: AtomicU64,
    wake: Notify,
}

#[derive(Default)]
struct ClientResult {
    paced: Vec<u64>,
    saturated: Vec<u64>,
    /// The stream ended (EOF, error) before the end marker: cut or lost.
    ended_early: bool,
}

/// The gateway process, killed when dropped.
struct Gateway {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Gateway {
    fn spawn(agent_url: &str, workers: usize) -> Gateway {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("gateway.toml");
        let config = format!(
            "listen = \"127.0.0.1:0\"\n\
             workers = {workers}\n\
             max_connections = 19000\n\
             [streams]\n\
             # no gateway pings during the run\n\
             ping_interval_ms = 3600000\n\
             replay_events = 1000\n\
             subscriber_lag_bytes = 1048576\n\
             [[agents]]\n\
             name = \"a\"\n\
             url = \"{agent_url}\"\n"
        );
        std::fs::write(&path, config).expect("write config");
        // A2A_GATEWAY_BIN: another build to measure with the same client (benches/compare.sh).
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

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// VmRSS of a process, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// utime + stime of a process (or "self"), in seconds.
fn cpu_secs(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name may hold spaces: fields are counted after its closing parenthesis.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // After ')': state is field 3, utime 14 and stime 15 (1-based), so indexes 11 and 12.
    (ticks(11) + ticks(12)) as f64 / 100.0
}

/// One request on its own connection (`Connection: close`): (status, body).
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

/// `data: {"t":NS,"p":PHASE...`: (t, phase).
fn parse_data(line: &[u8]) -> Option<(u64, usize)> {
    let rest = line.strip_prefix(b"data: {\"t\":")?;
    let mut t = 0u64;
    let mut i = 0;
    while i < rest.len() && rest[i].is_ascii_digit() {
        t = t * 10 + u64::from(rest[i] - b'0');
        i += 1;
    }
    let rest = rest[i..].strip_prefix(b",\"p\":")?;
    let p = *rest.first()?;
    p.is_ascii_digit().then_some((t, usize::from(p - b'0')))
}

/// One subscriber: connect, read the head, then count and time every event until the end marker.
async fn client(
    addr: SocketAddr,
    path: Arc<str>,
    shared: Arc<Shared>,
    gate: Option<Arc<Semaphore>>,
) -> ClientResult {
    let mut res = ClientResult::default();
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
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
    if s.write_all(req.as_bytes()).await.is_err() {
        return refused(&shared);
    }
    let mut buf = vec![0u8; 4096];
    let mut len = 0;
    // The response head.
    loop {
        match s.read(&mut buf[len..]).await {
            Ok(0) | Err(_) => return refused(&shared),
            Ok(n) => len += n,
        }
        if let Some(end) = buf[..len].windows(4).position(|w| w == b"\r\n\r\n") {
            if !buf.starts_with(b"HTTP/1.1 200") {
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
    // The body: chunk-size lines and SSE lines; only `data: ` lines matter.
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
            if let Some((t, phase)) = parse_data(&buf[start..start + i]) {
                let lat = at.saturating_sub(t);
                match phase {
                    PHASE_END => return res,
                    PHASE_PACED => res.paced.push(lat),
                    PHASE_SATURATED => res.saturated.push(lat),
                    _ => {}
                }
                if phase < shared.received.len() {
                    let n = shared.received[phase].fetch_add(1, Ordering::AcqRel) + 1;
                    if phase == PHASE_SATURATED && n >= shared.target.load(Ordering::Acquire) {
                        shared.wake.notify_one();
                    }
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

fn push(agent: &SampleAgent, task: &str, phase: usize, pad: &str) {
    let data = format!("{{\"t\":{},\"p\":{phase},\"pad\":\"{pad}\"}}", now_ns());
    agent.push_event(task, "tick", &data);
}

/// Wait until `received[phase]` reaches `n` (polling: for the phases that are not timed).
async fn wait_count(shared: &Shared, phase: usize, n: u64, what: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    while shared.received[phase].load(Ordering::Acquire) < n {
        if Instant::now() > deadline {
            eprintln!(
                "sse_fanout: timed out waiting for {what}: {} of {n}",
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

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

async fn scenario(n: usize, o: &Opts) {
    let agent = SampleAgent::start(AgentOptions {
        record_capacity: 0,
        ..AgentOptions::default()
    })
    .await
    .expect("agent");
    let gw = Gateway::spawn(&agent.base_url(), o.gateway_workers);
    let deadline = Instant::now() + Duration::from_secs(20);
    while http(gw.addr, "GET", "/readyz", "").await.0 != 200 {
        assert!(Instant::now() < deadline, "gateway ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, body) = http(
        gw.addr,
        "POST",
        "/agents/a/tasks",
        r#"{"input": {"topic": "x", "filename": "a.py"}}"#,
    )
    .await;
    assert!(
        (200..300).contains(&status),
        "task created: {status} {body}"
    );
    let json = &body[body.find('{').unwrap_or(0)..=body.rfind('}').unwrap_or(0)];
    let doc: serde_json::Value = serde_json::from_str(json).expect("task JSON");
    let task = doc["task_id"].as_str().expect("task_id").to_owned();
    let path: Arc<str> = Arc::from(match o.route {
        StreamRoute::Agent => format!("/agents/a/tasks/{task}/stream"),
        StreamRoute::Agentless => format!("/tasks/{task}/stream"),
    });
    let pad = "x".repeat(o.pad);
    let shared = Arc::new(Shared {
        received: Default::default(),
        heads: AtomicUsize::new(0),
        refused: AtomicUsize::new(0),
        target: AtomicU64::new(u64::MAX),
        wake: Notify::new(),
    });

    // Warm-up subscriber: the topic and its upstream exist, an event has gone through.
    let mut clients = vec![tokio::spawn(client(
        gw.addr,
        path.clone(),
        shared.clone(),
        None,
    ))];
    while shared.heads.load(Ordering::Acquire) == 0 {
        assert_eq!(shared.refused.load(Ordering::Acquire), 0, "warm-up stream");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    push(&agent, &task, PHASE_WARM, &pad);
    wait_count(&shared, PHASE_WARM, 1, "the warm-up event").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss_before = rss(gw.pid());

    // N subscribers, at most 256 handshakes at a time (the listen backlog is 1024).
    let connect_started = Instant::now();
    let gate = Arc::new(Semaphore::new(256));
    for _ in 0..n {
        clients.push(tokio::spawn(client(
            gw.addr,
            path.clone(),
            shared.clone(),
            Some(gate.clone()),
        )));
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while shared.heads.load(Ordering::Acquire) + shared.refused.load(Ordering::Acquire) < n + 1 {
        assert!(Instant::now() < deadline, "subscribers connected");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let connect_secs = connect_started.elapsed().as_secs_f64();
    let subs = shared.heads.load(Ordering::Acquire) as u64;
    push(&agent, &task, PHASE_SYNC, &pad);
    wait_count(&shared, PHASE_SYNC, subs, "every subscriber's first event").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss_after = rss(gw.pid());

    // Paced: a fixed rate.
    let rate = o
        .rate
        .unwrap_or(o.paced_copies / subs.max(1) as f64)
        .clamp(1.0, 1000.0);
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let paced_events = (o.paced.as_secs_f64() * rate).ceil() as u64;
    for _ in 0..paced_events {
        tick.tick().await;
        push(&agent, &task, PHASE_PACED, &pad);
    }
    wait_count(
        &shared,
        PHASE_PACED,
        paced_events * subs,
        "the paced events",
    )
    .await;

    // Saturated: as fast as the pipeline takes them, at most `window` events not yet received
    // by every subscriber.
    let window = o
        .window
        .unwrap_or_else(|| (65_536 / subs.max(1)).clamp(4, 128))
        // The sample agent drops a stream whose reader is 256 events behind.
        .min(200);
    let gw_cpu0 = cpu_secs(&gw.pid().to_string());
    let self_cpu0 = cpu_secs("self");
    let started = Instant::now();
    let mut sent = 0u64;
    while started.elapsed() < o.saturate {
        if sent >= window {
            let need = (sent - window + 1) * subs;
            shared.target.store(need, Ordering::Release);
            loop {
                let woken = shared.wake.notified();
                if shared.received[PHASE_SATURATED].load(Ordering::Acquire) >= need {
                    break;
                }
                if tokio::time::timeout(Duration::from_secs(10), woken)
                    .await
                    .is_err()
                {
                    eprintln!("sse_fanout: saturated phase stalled at {sent} events");
                    break;
                }
            }
            shared.target.store(u64::MAX, Ordering::Release);
        }
        push(&agent, &task, PHASE_SATURATED, &pad);
        sent += 1;
    }
    wait_count(
        &shared,
        PHASE_SATURATED,
        sent * subs,
        "the saturated events",
    )
    .await;
    let secs = started.elapsed().as_secs_f64();
    let gw_cpu = cpu_secs(&gw.pid().to_string()) - gw_cpu0;
    let self_cpu = cpu_secs("self") - self_cpu0;
    let rss_end = rss(gw.pid());

    // End marker: clients hand back their latencies.
    push(&agent, &task, PHASE_END, &pad);
    let mut paced = Vec::new();
    let mut saturated = Vec::new();
    let mut early = 0;
    for c in clients {
        match tokio::time::timeout(Duration::from_secs(60), c).await {
            Ok(Ok(r)) => {
                paced.extend(r.paced);
                saturated.extend(r.saturated);
                early += usize::from(r.ended_early);
            }
            _ => early += 1,
        }
    }
    paced.sort_unstable();
    saturated.sort_unstable();
    let copies = shared.received[PHASE_SATURATED].load(Ordering::Acquire);
    let lost = (paced_events + sent) * subs
        - (shared.received[PHASE_PACED].load(Ordering::Acquire) + copies);
    let per_sub = rss_after.saturating_sub(rss_before) as f64 / n as f64;
    println!(
        "sse_fanout N={n} (+1 warm-up, gateway workers={}): \
         saturated {:.0} copies/s ({:.0} events/s x {subs}, window {window}, {sent} events in {secs:.1} s) \
         p50 {:.2} ms p99 {:.2} ms; gateway CPU {:.2} us/copy ({:.0}% of a core), bench CPU {:.0}% | \
         paced {rate:.0} ev/s ({:.0} copies/s): p50 {:.2} ms p99 {:.2} ms max {:.2} ms | \
         RSS {:.1} -> {:.1} MiB = {per_sub:.0} B/subscriber (target <= 5100; {:.1} MiB after saturation) | \
         connect {connect_secs:.2} s, refused {}, ended early {early}, lost {lost}",
        o.gateway_workers,
        copies as f64 / secs,
        sent as f64 / secs,
        pct(&saturated, 0.5),
        pct(&saturated, 0.99),
        gw_cpu * 1e6 / copies.max(1) as f64,
        gw_cpu / secs * 100.0,
        self_cpu / secs * 100.0,
        rate * subs as f64,
        pct(&paced, 0.5),
        pct(&paced, 0.99),
        pct(&paced, 1.0),
        mib(rss_before),
        mib(rss_after),
        mib(rss_end),
        shared.refused.load(Ordering::Acquire),
    );
    drop(gw);
    agent.shutdown().await;
}

fn main() {
    EPOCH.get_or_init(Instant::now);
    // `cargo test --benches` runs bench binaries with `--bench` absent: keep that quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    let list = std::env::var("SUBSCRIBERS").unwrap_or_else(|_| "100,1000,10000".into());
    let mut o = Opts {
        subscribers: list
            .split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect(),
        gateway_workers: env_or("GATEWAY_WORKERS", 1),
        rate: std::env::var("RATE").ok().and_then(|v| v.parse().ok()),
        paced_copies: env_or("PACED_COPIES", 20_000.0),
        paced: Duration::from_secs_f64(env_or("PACED_SECS", 5.0)),
        saturate: Duration::from_secs_f64(env_or("SATURATE_SECS", 5.0)),
        window: std::env::var("WINDOW").ok().and_then(|v| v.parse().ok()),
        pad: env_or("PAD", 64),
        route: match std::env::var("ROUTE").as_deref() {
            Ok("agentless") => StreamRoute::Agentless,
            _ => StreamRoute::Agent,
        },
    };
    if quick {
        o.subscribers = vec![20];
        o.paced = Duration::from_millis(250);
        o.saturate = Duration::from_millis(250);
    }
    let threads = env_or("CLIENT_THREADS", 1usize).max(1);
    println!(
        "{}rerun: SUBSCRIBERS={} GATEWAY_WORKERS={} CLIENT_THREADS={threads} {} PACED_SECS={} \
         SATURATE_SECS={} PAD={}{} ROUTE={} cargo bench --bench sse_fanout",
        if quick {
            "quick mode (no --bench); "
        } else {
            ""
        },
        o.subscribers
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(","),
        o.gateway_workers,
        o.rate
            .map_or(format!("PACED_COPIES={}", o.paced_copies), |r| format!(
                "RATE={r}"
            )),
        o.paced.as_secs_f64(),
        o.saturate.as_secs_f64(),
        o.pad,
        o.window.map_or(String::new(), |w| format!(" WINDOW={w}")),
        match o.route {
            StreamRoute::Agent => "agent",
            StreamRoute::Agentless => "agentless",
        },
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("runtime");
    // Spawned, so the pusher runs on the runtime's threads, not on an extra one.
    rt.block_on(async move {
        tokio::spawn(async move {
            for &n in &o.subscribers {
                scenario(n, &o).await;
            }
        })
        .await
        .expect("scenarios");
    });
}
