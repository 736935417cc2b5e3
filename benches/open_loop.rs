//! An open-loop load client: requests at a fixed rate, latency measured from when each request
//! was due, not from when it was sent.
//!
//! wrk is closed-loop: a connection sends its next request only when the previous answer came,
//! so a slow server is sent less, and its worst moments are sampled less (coordinated
//! omission). To compare tails at the same offered load, the issue asks for a fixed rate: here
//! request `k` is due at `start + k / rate`; each of `conns` keep-alive connections takes the
//! next due request, waits for its time, sends it, and records `answer time − due time`. When
//! every connection is busy, requests wait, and that wait is in their latency, as it would be
//! for a caller arriving on schedule.
//!
//! ```sh
//! cargo bench --bench open_loop -- URL RATE [SECONDS] [CONNS] [BODY] [AUTHORIZATION]
//! # POST with BODY as application/json when BODY is given (and not "-"), else GET.
//! ```
//! Prints one line: `OPENLOOP rate=.. sent=.. ok=.. non2xx=.. errors=.. late_ms=..
//! p50_us=.. p90_us=.. p99_us=.. p999_us=.. max_us=..`; `late_ms` is how far behind schedule
//! the last request was sent (well above 0: the target could not keep up with the rate, and the
//! percentiles say by how much).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

struct Plan {
    uri: Uri,
    host: String,
    body: Option<Bytes>,
    auth: Option<String>,
    start: Instant,
    interval: Duration,
    total: u64,
    next: AtomicU64,
}

#[derive(Default)]
struct Tally {
    latencies_us: Vec<u32>,
    ok: u64,
    non2xx: u64,
    errors: u64,
    late: Duration,
}

fn main() -> Result<(), String> {
    // `cargo bench` passes `--bench` to harness-less benches: skip flags.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    if args.len() < 2 {
        return Err(
            "usage: open_loop URL RATE [SECONDS=10] [CONNS=64] [BODY|-] [AUTHORIZATION]".into(),
        );
    }
    let uri: Uri = args[0].parse().map_err(|e| format!("URL: {e}"))?;
    let rate: f64 = args[1].parse().map_err(|e| format!("RATE: {e}"))?;
    let secs: f64 = args
        .get(2)
        .map_or(Ok(10.0), |s| s.parse())
        .map_err(|e| format!("SECONDS: {e}"))?;
    let conns: usize = args
        .get(3)
        .map_or(Ok(64), |s| s.parse())
        .map_err(|e| format!("CONNS: {e}"))?;
    let body = args
        .get(4)
        .filter(|b| b.as_str() != "-")
        .map(|b| Bytes::from(b.clone()));
    let auth = args.get(5).filter(|a| !a.is_empty()).cloned();
    if !(rate > 0.0 && secs > 0.0 && conns > 0) {
        return Err("RATE, SECONDS and CONNS must be positive".into());
    }
    let host = uri.authority().ok_or("URL needs a host")?.to_string();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let plan = Arc::new(Plan {
        uri,
        host,
        body,
        auth,
        start: Instant::now() + Duration::from_millis(200),
        interval: Duration::from_secs_f64(1.0 / rate),
        total: (rate * secs) as u64,
        next: AtomicU64::new(0),
    });
    let tallies = rt.block_on(async {
        let workers: Vec<_> = (0..conns)
            .map(|_| tokio::spawn(worker(plan.clone())))
            .collect();
        let mut all = Vec::with_capacity(conns);
        for w in workers {
            all.push(w.await.map_err(|e| e.to_string())??);
        }
        Ok::<_, String>(all)
    })?;
    let mut lat: Vec<u32> = tallies
        .iter()
        .flat_map(|t| t.latencies_us.iter().copied())
        .collect();
    lat.sort_unstable();
    let pct = |p: f64| -> u32 {
        if lat.is_empty() {
            return 0;
        }
        let i = ((p / 100.0) * lat.len() as f64).ceil() as usize;
        lat[i.clamp(1, lat.len()) - 1]
    };
    let sum = |f: fn(&Tally) -> u64| tallies.iter().map(f).sum::<u64>();
    let late = tallies.iter().map(|t| t.late).max().unwrap_or_default();
    println!(
        "OPENLOOP rate={rate} sent={} ok={} non2xx={} errors={} late_ms={} p50_us={} p90_us={} p99_us={} p999_us={} max_us={}",
        lat.len(),
        sum(|t| t.ok),
        sum(|t| t.non2xx),
        sum(|t| t.errors),
        late.as_millis(),
        pct(50.0),
        pct(90.0),
        pct(99.0),
        pct(99.9),
        lat.last().copied().unwrap_or(0),
    );
    Ok(())
}

/// One keep-alive connection: takes due requests until the plan is done.
async fn worker(plan: Arc<Plan>) -> Result<Tally, String> {
    let mut tally = Tally::default();
    let mut tx: Option<http1::SendRequest<Full<Bytes>>> = None;
    loop {
        let k = plan.next.fetch_add(1, Ordering::Relaxed);
        if k >= plan.total {
            return Ok(tally);
        }
        let due = plan.start + plan.interval.mul_f64(k as f64);
        tokio::time::sleep_until(due.into()).await;
        tally.late = tally
            .late
            .max(Instant::now().saturating_duration_since(due));
        if tx.as_ref().is_none_or(|t| t.is_closed()) {
            tx = Some(connect(&plan).await?);
        }
        let Some(sender) = tx.as_mut() else { continue };
        let mut req = Request::builder()
            .method(if plan.body.is_some() {
                Method::POST
            } else {
                Method::GET
            })
            .uri(plan.uri.path_and_query().map_or("/", |p| p.as_str()))
            .header(hyper::header::HOST, &plan.host);
        if plan.body.is_some() {
            req = req.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        if let Some(a) = &plan.auth {
            req = req.header(hyper::header::AUTHORIZATION, a);
        }
        let req = req
            .body(Full::new(plan.body.clone().unwrap_or_default()))
            .map_err(|e| e.to_string())?;
        let outcome = async {
            sender.ready().await?;
            let res = sender.send_request(req).await?;
            let status = res.status();
            res.into_body().collect().await?;
            Ok::<_, hyper::Error>(status)
        }
        .await;
        match outcome {
            Ok(status) => {
                let took = Instant::now().saturating_duration_since(due);
                tally
                    .latencies_us
                    .push(took.as_micros().min(u32::MAX as u128) as u32);
                if status.is_success() {
                    tally.ok += 1;
                } else {
                    tally.non2xx += 1;
                }
            }
            Err(_) => {
                tally.errors += 1;
                tx = None;
            }
        }
    }
}

async fn connect(plan: &Plan) -> Result<http1::SendRequest<Full<Bytes>>, String> {
    let stream = TcpStream::connect(&plan.host)
        .await
        .map_err(|e| format!("connect {}: {e}", plan.host))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let (tx, conn) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(tx)
}
