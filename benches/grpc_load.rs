//! A closed-loop gRPC load client for benches/load/run.sh (GRPC_RUN): A2A's `SendMessage` over
//! h2c, what wrk is to the JSON runs. `conns` HTTP/2 connections each keep `streams` calls in
//! flight; every call is a new message (its own `messageId`, as send_message.lua sends), and
//! its latency is from sending to the call's status.
//!
//! ```sh
//! cargo bench --bench grpc_load -- URL SECONDS [CONNS=8] [STREAMS=8] [TENANT] [WARMUP_SECONDS=0]
//! # URL: http://127.0.0.1:PORT (the service path is appended)
//! ```
//! Prints `GRPCLOAD requests=.. ok=.. failed=.. errors=.. rps=.. p50_us=.. p99_us=.. max_us=..`
//! (`failed`: calls answered with a non-OK gRPC status, `errors`: calls that got no answer, a
//! broken connection; `requests` and `rps` count the OK ones), then the same as run.sh reads
//! wrk's (`SUMMARY requests=.. rps=.. p50_us=.. p99_us=.. non2xx=.. sock_errors=..` and a
//! `STATUS grpc-0 N` line). Warm-up calls are not counted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2;
use hyper::{Request, Uri};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::json;
use tokio::net::TcpStream;

#[derive(Default)]
struct Tally {
    latencies_us: Vec<u32>,
    ok: u64,
    failed: u64,
    errors: u64,
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    if args.len() < 2 {
        return Err(
            "usage: grpc_load URL SECONDS [CONNS=8] [STREAMS=8] [TENANT] [WARMUP_SECONDS=0]".into(),
        );
    }
    let base: Uri = args[0].parse().map_err(|e| format!("URL: {e}"))?;
    let secs: f64 = args[1].parse().map_err(|e| format!("SECONDS: {e}"))?;
    let conns: usize = args
        .get(2)
        .map_or(Ok(8), |s| s.parse())
        .map_err(|e| format!("CONNS: {e}"))?;
    let streams: usize = args
        .get(3)
        .map_or(Ok(8), |s| s.parse())
        .map_err(|e| format!("STREAMS: {e}"))?;
    let tenant = args.get(4).filter(|t| !t.is_empty() && *t != "-").cloned();
    let warmup: f64 = args
        .get(5)
        .map_or(Ok(0.0), |s| s.parse())
        .map_err(|e| format!("WARMUP: {e}"))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(run(base, secs, conns, streams, tenant, warmup))
}

async fn run(
    base: Uri,
    secs: f64,
    conns: usize,
    streams: usize,
    tenant: Option<String>,
    warmup: f64,
) -> Result<(), String> {
    let addr = base.authority().ok_or("URL without host")?.to_string();
    let uri: Uri = format!("http://{addr}{}SendMessage", a2a_grpc::SERVICE_PATH)
        .parse()
        .map_err(|e| format!("{e}"))?;
    let desc = a2a_grpc::rpc("SendMessage").ok_or("no SendMessage")?.input;
    let tenant = Arc::new(tenant);
    let start = Instant::now();
    let counted_from = start + Duration::from_secs_f64(warmup);
    let end = counted_from + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for c in 0..conns {
        let stream = TcpStream::connect(&addr).await.map_err(|e| e.to_string())?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let (sender, conn) = http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        for s in 0..streams {
            let (mut sender, uri, desc, tenant) =
                (sender.clone(), uri.clone(), desc.clone(), tenant.clone());
            tasks.push(tokio::spawn(async move {
                let mut tally = Tally::default();
                let mut n = 0u64;
                loop {
                    let now = Instant::now();
                    if now >= end {
                        break;
                    }
                    n += 1;
                    let mut msg = json!({"message": {"messageId": format!("load-{c}-{s}-{n}-{}",
                        start.elapsed().as_nanos()), "role": "ROLE_USER",
                        "parts": [{"text": "hello"}]}});
                    if let Some(t) = tenant.as_deref() {
                        msg["tenant"] = json!(t);
                    }
                    let Ok(bytes) = a2a_grpc::json::to_bytes(&desc, &msg) else {
                        tally.errors += 1;
                        continue;
                    };
                    let req = Request::post(uri.clone())
                        .header("content-type", "application/grpc")
                        .header("te", "trailers")
                        .header("a2a-version", "1.0")
                        .body(Full::new(a2a_grpc::frame::encode(&bytes)))
                        .expect("a request");
                    let sent = Instant::now();
                    let answer = async {
                        let res = sender.send_request(req).await.ok()?;
                        let (parts, body) = res.into_parts();
                        let collected = body.collect().await.ok()?;
                        let status = collected
                            .trailers()
                            .and_then(|t| t.get("grpc-status").cloned())
                            .or_else(|| parts.headers.get("grpc-status").cloned());
                        let _: Bytes = collected.to_bytes();
                        status
                    };
                    let status = answer.await;
                    if sent < counted_from {
                        continue;
                    }
                    match status {
                        Some(s) if s == "0" => {
                            tally.ok += 1;
                            let us = sent.elapsed().as_micros().min(u32::MAX as u128) as u32;
                            tally.latencies_us.push(us);
                        }
                        Some(_) => tally.failed += 1,
                        None => {
                            tally.errors += 1;
                            break;
                        }
                    }
                }
                tally
            }));
        }
    }
    let mut all = Tally::default();
    for t in tasks {
        let t = t.await.map_err(|e| e.to_string())?;
        all.latencies_us.extend(t.latencies_us);
        all.ok += t.ok;
        all.failed += t.failed;
        all.errors += t.errors;
    }
    all.latencies_us.sort_unstable();
    let pct = |p: f64| -> u32 {
        if all.latencies_us.is_empty() {
            return 0;
        }
        let i = ((all.latencies_us.len() as f64 - 1.0) * p).round() as usize;
        all.latencies_us[i]
    };
    let requests = all.ok + all.failed + all.errors;
    let rps = all.ok as f64 / secs;
    let (p50, p99) = (pct(0.5), pct(0.99));
    println!(
        "GRPCLOAD requests={requests} ok={} failed={} errors={} rps={rps:.1} p50_us={p50} p99_us={p99} max_us={}",
        all.ok,
        all.failed,
        all.errors,
        all.latencies_us.last().copied().unwrap_or(0)
    );
    println!(
        "SUMMARY requests={} rps={rps:.1} p50_us={p50} p99_us={p99} non2xx={} sock_errors={}",
        all.ok, all.failed, all.errors
    );
    println!("STATUS grpc-0 {}", all.ok);
    Ok(())
}
