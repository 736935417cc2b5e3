//! Task event streams through the gateway: one upstream connection per task shared by many
//! subscribers, gateway-numbered events with replay, the WHATWG parsing rules on a torture
//! stream, the gateway's own pings, reconnects, the end of a task, slow consumers, and /events.

use std::time::Duration;

use crate::support::sse::Events;
use crate::support::*;
use a2a_gateway::config::Config;
use a2a_sample_agent::{AgentOptions, SampleAgent};
use bytes::Bytes;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(10);

async fn gateway(a: &SampleAgent, tweak: impl FnOnce(&mut Config)) -> TestGateway {
    let g = TestGateway::start(&[("a", a)], |cfg| {
        ingest(cfg);
        tweak(cfg);
    })
    .await;
    g.ready().await;
    g
}

async fn subscribe(g: &TestGateway, path: &str, headers: &[(&str, &str)]) -> Events {
    let mut req = hyper::Request::get(format!("{}{path}", g.http.base));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .body(http_body_util::Full::new(Bytes::new()))
        .expect("request");
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http();
    Events::new(client.request(req).await.expect("stream opens"))
}

async fn upstream_open(a: &SampleAgent, id: &str, n: usize) {
    wait_for("the agent's stream", || {
        let open = a.stream_connections(id);
        async move { open == n }
    })
    .await;
}

#[tokio::test]
async fn a_hundred_subscribers_share_one_upstream_connection() {
    let a = agent().await;
    let g = gateway(&a, |_| {}).await;
    let id = g.create_task("a").await;
    let path = format!("/agents/a/tasks/{id}/stream");
    let mut subs = Vec::new();
    for _ in 0..100 {
        subs.push(subscribe(&g, &path, &[]).await);
    }
    upstream_open(&a, &id, 1).await;
    assert_eq!(a.streams_opened(&id), 1, "one upstream for 100 subscribers");
    for i in 0..3 {
        a.push_event(&id, "log", &format!("{{\"n\":{i}}}"));
    }
    let mut first: Option<Vec<(String, Option<String>)>> = None;
    for s in &mut subs {
        let mut got = Vec::new();
        for _ in 0..3 {
            let e = s.next_event(WAIT).await.expect("event");
            assert_eq!(e.event, "log");
            got.push((e.data, e.id));
        }
        match &first {
            None => first = Some(got),
            Some(f) => assert_eq!(&got, f, "every subscriber gets the same events and ids"),
        }
    }
    let first = first.expect("events");
    assert_eq!(first[2].0, "{\"n\":2}");
    let ids: Vec<&str> = first
        .iter()
        .map(|(_, id)| id.as_deref().expect("id"))
        .collect();
    let epoch = ids[0].split_once('-').expect("EPOCH-SEQ").0;
    assert_eq!(
        ids,
        [
            format!("{epoch}-1"),
            format!("{epoch}-2"),
            format!("{epoch}-3")
        ]
    );
    assert_eq!(g.metric("a2a_gateway_stream_subscribers", &[]).await, 100.0);
    assert_eq!(g.metric("a2a_gateway_stream_upstreams", &[]).await, 1.0);
    assert_eq!(
        g.metric("a2a_gateway_stream_events_in_total", &[]).await,
        3.0
    );
    assert!(g.metric("a2a_gateway_stream_events_out_total", &[]).await >= 300.0);
    // The last subscriber gone, the upstream closes after the linger.
    drop(subs);
    upstream_open(&a, &id, 0).await;
}

#[tokio::test]
async fn replay_after_last_event_id_and_late_subscribers_miss_nothing() {
    let a = agent().await;
    let g = gateway(&a, |_| {}).await;
    let id = g.create_task("a").await;
    let path = format!("/agents/a/tasks/{id}/stream");
    let mut first = subscribe(&g, &path, &[]).await;
    upstream_open(&a, &id, 1).await;
    for i in 1..=3 {
        a.push_event(&id, "log", &format!("{{\"n\":{i}}}"));
    }
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(first.next_event(WAIT).await.expect("event").id.expect("id"));
    }
    // Resume after the first event: by header, and by query (what a browser can do).
    let mut by_header = subscribe(&g, &path, &[("last-event-id", &ids[0])]).await;
    let mut by_query = subscribe(&g, &format!("{path}?last_event_id={}", ids[0]), &[]).await;
    // A late subscriber without an id: the buffered history.
    let mut late = subscribe(&g, &path, &[]).await;
    a.push_event(&id, "log", "{\"n\":4}");
    for (s, expect) in [
        (&mut by_header, vec![2, 3, 4]),
        (&mut by_query, vec![2, 3, 4]),
        (&mut late, vec![1, 2, 3, 4]),
    ] {
        for n in expect {
            let e = s.next_event(WAIT).await.expect("event");
            assert_eq!(e.data, format!("{{\"n\":{n}}}"));
        }
        // No duplicate at the switch from history to live.
        assert!(s.next_event(Duration::from_millis(300)).await.is_none());
    }
    assert_eq!(a.streams_opened(&id), 1);
    assert_eq!(g.metric("a2a_gateway_stream_replays_total", &[]).await, 2.0);
    // An id from another epoch (another replica, or before a restart) replays everything kept.
    let mut other = subscribe(&g, &path, &[("last-event-id", "00000000-2")]).await;
    assert_eq!(
        other.next_event(WAIT).await.expect("event").data,
        "{\"n\":1}"
    );
}

/// Every parsing edge case of the WHATWG rules, split across reads where it hurts.
#[tokio::test]
async fn a_torture_stream_is_parsed_by_the_rules() {
    let a = agent().await;
    let g = gateway(&a, |_| {}).await;
    let id = g.create_task("a").await;
    let mut s = subscribe(&g, &format!("/tasks/{id}/stream"), &[]).await;
    upstream_open(&a, &id, 1).await;
    let pieces: [&[u8]; 9] = [
        b"\xEF\xBB",
        b"\xBF: a comment\r",
        b"\nevent: log\rdata: line one\r\ndata:line two\n",
        b"data\nid: up-7\r",
        b"\r",
        b"retry: 12x\nid: bad\0id\ndata: after a bad id\n\n",
        b"event: artifact.update\ndata: {\"artifact_id\":\"a1\"}\n\nevent: ping\ndata: {}\n\n",
        b"event\ndata: typeless\r\n\r\n",
        b"id: up-8\ndata: never finished\n",
    ];
    for p in pieces {
        a.push_raw(&id, Bytes::from_static(p));
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    let expected = [
        ("log", "line one\nline two\n"),
        ("message", "after a bad id"),
        ("artifact.update", "{\"artifact_id\":\"a1\"}"),
        ("message", "typeless"),
    ];
    for (event, data) in expected {
        let e = s.next_event(WAIT).await.expect("event");
        assert_eq!(
            (e.event.as_str(), e.data.as_str()),
            (event, data),
            "{}",
            s.raw
        );
    }
    // The agent drops the stream mid-event: the partial event is never forwarded, and the
    // gateway resumes from the id of the agent's last dispatched event (not the `id: up-8`
    // of the event it never finished).
    a.close_streams(&id);
    wait_for("reconnected", || {
        let n = a.streams_opened(&id);
        async move { n == 2 }
    })
    .await;
    let streams: Vec<_> = a
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/stream"))
        .collect();
    assert_eq!(
        streams[1]
            .headers
            .get("last-event-id")
            .and_then(|v| v.to_str().ok()),
        Some("up-7")
    );
    assert!(s.next_event(Duration::from_millis(500)).await.is_none());
    assert!(!s.raw.contains("never finished"), "{}", s.raw);
    // What the gateway wrote is safe: its own ids, one data line per line, no agent ping.
    assert!(
        !s.raw.contains("up-7") && !s.raw.contains("event: ping\ndata: {}"),
        "{}",
        s.raw
    );
    assert!(
        s.raw
            .contains("event: log\ndata: line one\ndata: line two\ndata: \n\n"),
        "{}",
        s.raw
    );
}

#[tokio::test]
async fn quiet_streams_get_the_gateways_own_pings() {
    // The agent pings every 100 ms; the gateway every 400 ms, and only its own go out.
    let a = agent_with(AgentOptions {
        ping_every: Duration::from_millis(100),
        ..AgentOptions::default()
    })
    .await;
    let g = gateway(&a, |cfg| {
        cfg.streams.ping_interval = Duration::from_millis(400);
    })
    .await;
    let id = g.create_task("a").await;
    let mut s = subscribe(&g, &format!("/tasks/{id}/stream"), &[]).await;
    let started = tokio::time::Instant::now();
    let mut pings = Vec::new();
    while started.elapsed() < Duration::from_millis(2100) {
        if let Some(e) = s.next(Duration::from_millis(100)).await {
            assert_eq!(e.event, "ping", "nothing but pings on a quiet stream");
            let data: Value = serde_json::from_str(&e.data).expect("json");
            assert!(a2a_gateway::protocol::time::parse_strict(
                data["timestamp"].as_str().expect("timestamp")
            )
            .is_some());
            pings.push(tokio::time::Instant::now());
        }
    }
    assert!(
        (4..=6).contains(&pings.len()),
        "{} pings in 2.1 s",
        pings.len()
    );
    for w in pings.windows(2) {
        assert!(
            w[1] - w[0] >= Duration::from_millis(300),
            "{:?}",
            w[1] - w[0]
        );
    }
    // Pings are not numbered (not replayable).
    for block in s.raw.split("\n\n").filter(|b| b.contains("event: ping")) {
        assert!(!block.contains("id:"), "{block}");
    }
}

#[tokio::test]
async fn an_upstream_drop_is_resumed_while_subscribers_stay() {
    let a = agent().await;
    let g = gateway(&a, |_| {}).await;
    let id = g.create_task("a").await;
    let mut s = subscribe(&g, &format!("/tasks/{id}/stream"), &[]).await;
    upstream_open(&a, &id, 1).await;
    a.push_raw(
        &id,
        Bytes::from_static(b"id: up-1\nevent: log\ndata: before\n\n"),
    );
    assert_eq!(s.next_event(WAIT).await.expect("event").data, "before");
    a.close_streams(&id);
    upstream_open(&a, &id, 1).await;
    wait_for("second upstream", || {
        let n = a.streams_opened(&id);
        async move { n == 2 }
    })
    .await;
    a.push_event(&id, "log", "after");
    let e = s.next_event(WAIT).await.expect("event after the reconnect");
    assert_eq!(e.data, "after");
    assert!(!s.ended, "the subscriber stayed connected");
    assert!(e.id.expect("id").ends_with("-2"), "numbering carries on");
    assert_eq!(
        g.metric("a2a_gateway_stream_upstream_reconnects_total", &[])
            .await,
        1.0
    );
}

#[tokio::test]
async fn the_end_of_a_task_closes_its_stream_and_later_requests_get_204() {
    let a = agent().await;
    let g = gateway(&a, |_| {}).await;
    // Learned from the ledger: a push says COMPLETED.
    let id = g.create_task("a").await;
    let mut s = subscribe(&g, &format!("/tasks/{id}/stream"), &[]).await;
    let mut s2 = subscribe(&g, &format!("/agents/a/tasks/{id}/stream"), &[]).await;
    upstream_open(&a, &id, 1).await;
    let done = a
        .set_status(
            &id,
            "COMPLETED",
            json!({"output": {"summary": "ok", "filename": "a.py"}}),
        )
        .expect("known");
    assert_eq!(g.push(&done).await.status, 202);
    for sub in [&mut s, &mut s2] {
        let e = sub.next_event(WAIT).await.expect("final event");
        assert_eq!(e.event, "status");
        let task: Value = serde_json::from_str(&e.data).expect("the task");
        assert_eq!(
            (task["task_id"].as_str(), task["status"].as_str()),
            (Some(id.as_str()), Some("COMPLETED"))
        );
        assert!(sub.until_end(WAIT).await, "the stream ends");
        assert!(!sub.failed);
    }
    let r = g.http.get(&format!("/tasks/{id}/stream")).await;
    assert_eq!(r.status, 204);
    assert!(r.body.is_empty());

    // Learned from the agent: its stream ends and its Task says FAILED (no push at all).
    let id = g.create_task("a").await;
    let mut s = subscribe(&g, &format!("/tasks/{id}/stream"), &[]).await;
    upstream_open(&a, &id, 1).await;
    a.set_status(
        &id,
        "FAILED",
        json!({"error": {"code": "E", "message": "boom"}}),
    )
    .expect("known");
    a.close_streams(&id);
    let e = s.next_event(WAIT).await.expect("final event");
    assert_eq!(e.event, "status");
    assert!(e.data.contains("\"FAILED\""), "{}", e.data);
    assert!(s.until_end(WAIT).await);
    assert_eq!(g.http.get(&format!("/tasks/{id}/stream")).await.status, 204);
}

#[tokio::test]
async fn a_slow_consumer_is_cut_while_the_others_keep_pace() {
    let a = agent().await;
    let g = gateway(&a, |cfg| {
        cfg.streams.lag_bytes = 256 * 1024;
        cfg.streams.replay_events = 100_000;
        cfg.streams.replay_bytes = 256 << 20;
    })
    .await;
    let id = g.create_task("a").await;
    let path = format!("/tasks/{id}/stream");
    let mut fast = [
        subscribe(&g, &path, &[]).await,
        subscribe(&g, &path, &[]).await,
    ];
    // Opened and never read.
    let slow = subscribe(&g, &path, &[]).await;
    upstream_open(&a, &id, 1).await;
    let chunk = "x".repeat(16 * 1024);
    let total = 1504; // 23.5 MiB: more than the socket buffers and the lag bound together
    let mut next = vec![0usize; fast.len()];
    for i in 0..total {
        a.push_event(&id, "log", &format!("{i} {chunk}"));
        if i % 8 == 7 {
            // Keep the fast ones current: 8 events (128 KiB) is half the lag bound, so a fast
            // subscriber never depends on the kernel's socket buffers to stay within it (with
            // 50 events, 800 KiB, it did, and under a loaded machine it was cut now and then).
            for (f, seen) in fast.iter_mut().zip(next.iter_mut()) {
                while *seen <= i {
                    let e = f.next_event(WAIT).await.expect("fast subscriber keeps up");
                    assert!(e.data.starts_with(&format!("{seen} ")), "in order");
                    *seen += 1;
                }
            }
        }
    }
    assert_eq!(next, vec![total; fast.len()]);
    wait_for("slow consumer cut", || async {
        g.metric("a2a_gateway_stream_slow_consumer_disconnects_total", &[])
            .await
            == 1.0
    })
    .await;
    assert_eq!(a.streams_opened(&id), 1, "the upstream never waited");
    // Its connection was ended: what the sockets held, then the end, without every event.
    let mut slow = slow;
    assert!(
        slow.until_end(WAIT).await,
        "the slow subscriber's stream ends"
    );
    assert!(slow.raw.len() < total * chunk.len(), "cut before the end");
}

#[tokio::test]
async fn events_carries_many_tasks_and_every_status_change() {
    let a = agent().await;
    let g = gateway(&a, |_| {}).await;
    let (t1, t2) = (g.create_task("a").await, g.create_task("a").await);
    let mut all = subscribe(&g, "/events", &[]).await;
    let mut two = subscribe(&g, &format!("/events?agent=a&task={t1}&task={t2}"), &[]).await;
    upstream_open(&a, &t1, 1).await;
    upstream_open(&a, &t2, 1).await;
    a.push_event(&t1, "log", "{\"m\":\"one\"}");
    a.push_event(&t2, "log", "{\"m\":\"two\"}");
    let mut tagged = Vec::new();
    while tagged.len() < 2 {
        let e = two.next_event(WAIT).await.expect("tagged event");
        assert_eq!(e.event, "log");
        let d: Value = serde_json::from_str(&e.data).expect("json");
        tagged.push((
            d["task_id"].as_str().expect("task_id").to_owned(),
            d["data"]["m"].as_str().expect("data").to_owned(),
        ));
    }
    tagged.sort();
    let mut want = vec![
        (t1.clone(), "one".to_owned()),
        (t2.clone(), "two".to_owned()),
    ];
    want.sort();
    assert_eq!(tagged, want);
    let working = a.set_status(&t2, "WORKING", Value::Null).expect("known");
    assert_eq!(g.push(&working).await.status, 202);
    let t3 = g.create_task("a").await;
    for (s, tasks) in [
        (&mut all, vec![t2.clone(), t3.clone()]),
        (&mut two, vec![t2.clone()]),
    ] {
        for t in tasks {
            let e = s.next_event(WAIT).await.expect("status change");
            assert_eq!(e.event, "task.status.updated", "{}", s.raw);
            let d: Value = serde_json::from_str(&e.data).expect("json");
            assert_eq!(d["event_type"], "task.status.updated");
            assert_eq!(d["data"]["task_id"], t.as_str());
        }
    }
    // t3 is not in the second connection's filter.
    assert!(two.next_event(Duration::from_millis(300)).await.is_none());
    let r = g.http.get("/events?colour=blue").await;
    assert_eq!(
        (r.status, r.error_code().as_str()),
        (400, "INVALID_REQUEST")
    );
    let r = g.http.get("/events?agent=nobody").await;
    assert_eq!(r.error_code(), "UNKNOWN_AGENT");
}

/// Two gateway processes on one Redis: a change ingested on one reaches `/events` clients of
/// the other (the apply script publishes it; every replica relays the channel).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_reach_every_replica_through_redis() {
    use crate::support::process::GwProc;
    use std::io::Write;
    let r = crate::support::redis_server::RedisServer::start();
    let a = agent().await;
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    write!(
        f,
        "listen = \"127.0.0.1:0\"\n[[agents]]\nname = \"a\"\nurl = \"{}\"\ningest_token = \"{TOKEN}\"\n[redis]\nurl = \"{}\"\n",
        a.base_url(),
        r.url()
    )
    .expect("config");
    let (p1, p2) = (GwProc::spawn(f.path()), GwProc::spawn(f.path()));
    p1.ready().await;
    p2.ready().await;
    // Ready means subscribed to the change channel too.
    assert_eq!(p2.http.get("/readyz").await.json()["change_feed"], "ok");
    let open = |p: &GwProc| {
        let base = p.http.base.clone();
        async move {
            let req = hyper::Request::get(format!("{base}/events?agent=a"))
                .body(http_body_util::Full::new(Bytes::new()))
                .expect("request");
            let client =
                hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                    .build_http();
            Events::new(client.request(req).await.expect("stream opens"))
        }
    };
    let (mut on1, mut on2) = (open(&p1).await, open(&p2).await);
    // Created through replica 1, moved by a push to replica 2.
    let created = p1.http.post_task("a").await;
    let id = created.json()["task_id"].as_str().expect("id").to_owned();
    let working = a.set_status(&id, "WORKING", Value::Null).expect("known");
    assert_eq!(p2.push(&working).await.status, 202);
    for s in [&mut on1, &mut on2] {
        for status in ["SUBMITTED", "WORKING"] {
            let e = s
                .next_event(WAIT)
                .await
                .expect("change from either replica");
            assert_eq!(e.event, "task.status.updated");
            let d: Value = serde_json::from_str(&e.data).expect("json");
            assert_eq!(
                (d["data"]["task_id"].as_str(), d["data"]["status"].as_str()),
                (Some(id.as_str()), Some(status))
            );
        }
    }
    // A refusal is published from the apply script too, to every replica: an update that
    // would move the task back to SUBMITTED, pushed to replica 1.
    let back = doc_at(
        &a,
        &id,
        "SUBMITTED",
        a2a_gateway::protocol::time::now_ms() + 1000,
    );
    assert_eq!(p1.push(&back).await.status, 409);
    for s in [&mut on1, &mut on2] {
        let e = s
            .next_event(WAIT)
            .await
            .expect("the refusal, on either replica");
        assert_eq!(e.event, "task.transition.refused");
        let d: Value = serde_json::from_str(&e.data).expect("json");
        assert_eq!(
            [
                &d["task_id"],
                &d["agent"],
                &d["recorded"],
                &d["offered"],
                &d["reason"]
            ],
            [
                &json!(id),
                &json!("a"),
                &json!("WORKING"),
                &json!("SUBMITTED"),
                &json!("backwards")
            ]
        );
    }
}

/// An agent that will not stream answers the request itself: no empty 200.
#[tokio::test]
async fn a_stream_the_agent_refuses_is_an_error_not_an_empty_stream() {
    let a = agent().await;
    let g = gateway(&a, |_| {}).await;
    // A task the agent does not know (and the ledger neither).
    let r = g
        .http
        .get("/agents/a/tasks/0b5a4c43-64c5-4bd1-a2a8-1ad2a3c2e0f4/stream")
        .await;
    assert_eq!((r.status, r.error_code().as_str()), (404, "TASK_NOT_FOUND"));
    // The agent answers something that is not an event stream.
    let id = g.create_task("a").await;
    a.script_once(
        a2a_sample_agent::Route::Stream,
        a2a_sample_agent::Reply::Json(200, json!({"not": "a stream"})),
    );
    let r = g.http.get(&format!("/tasks/{id}/stream")).await;
    assert_eq!(
        (r.status, r.error_code().as_str()),
        (502, "AGENT_PROTOCOL_VIOLATION")
    );
    // The agent is gone.
    drop(a);
    let r = g.http.get(&format!("/tasks/{id}/stream")).await;
    assert_eq!(
        (r.status, r.error_code().as_str()),
        (502, "AGENT_UNREACHABLE")
    );
    assert_eq!(g.metric("a2a_gateway_stream_upstreams", &[]).await, 0.0);
}

/// An event larger than the lag bound does not make a subscriber that keeps up look slow.
#[tokio::test]
async fn a_large_event_does_not_cut_subscribers_that_keep_up() {
    let a = agent().await;
    let g = gateway(&a, |cfg| cfg.streams.lag_bytes = 1024).await;
    let id = g.create_task("a").await;
    let mut s = subscribe(&g, &format!("/tasks/{id}/stream"), &[]).await;
    upstream_open(&a, &id, 1).await;
    let big = "y".repeat(8 * 1024);
    a.push_event(&id, "log", &big);
    a.push_event(&id, "log", "small");
    assert_eq!(s.next_event(WAIT).await.expect("big event").data, big);
    assert_eq!(s.next_event(WAIT).await.expect("next").data, "small");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(!s.ended);
    assert_eq!(
        g.metric("a2a_gateway_stream_slow_consumer_disconnects_total", &[])
            .await,
        0.0
    );
}

/// More history than a subscriber may fall behind: a newcomer gets the newest part of it (up
/// to the lag bound) and is not cut; neither is one resuming from an id out of that window.
#[tokio::test]
async fn history_beyond_the_lag_bound_does_not_cut_newcomers() {
    let a = agent().await;
    let g = gateway(&a, |cfg| {
        cfg.streams.lag_bytes = 8 * 1024;
        cfg.streams.replay_bytes = 1 << 20;
    })
    .await;
    let id = g.create_task("a").await;
    let path = format!("/tasks/{id}/stream");
    let mut first = subscribe(&g, &path, &[]).await;
    upstream_open(&a, &id, 1).await;
    let line = "z".repeat(1000);
    for i in 0..40 {
        a.push_event(&id, "log", &format!("{i:02} {line}"));
    }
    let mut first_id = None;
    for i in 0..40 {
        let e = first.next_event(WAIT).await.expect("event");
        assert!(e.data.starts_with(&format!("{i:02} ")));
        first_id.get_or_insert(e.id.expect("id"));
    }
    for headers in [
        vec![],
        vec![("last-event-id", first_id.as_deref().expect("id"))],
    ] {
        let mut late = subscribe(&g, &path, &headers).await;
        let e = late.next_event(WAIT).await.expect("history");
        let n: usize = e.data[..2].parse().expect("number");
        assert!(
            (30..40).contains(&n),
            "starts within the last 8 KiB, at {n}"
        );
        for k in n + 1..40 {
            assert!(late
                .next_event(WAIT)
                .await
                .expect("rest")
                .data
                .starts_with(&format!("{k:02} ")));
        }
        assert!(!late.ended);
    }
    assert_eq!(
        g.metric("a2a_gateway_stream_slow_consumer_disconnects_total", &[])
            .await,
        0.0
    );
}

/// Stream requests on a fresh HTTP/1.1 connection take the lean path: check its wire format.
#[tokio::test]
async fn the_lean_stream_path_speaks_correct_http() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let a = agent().await;
    let g = gateway(&a, |_| {}).await;
    let id = g.create_task("a").await;
    let mut tcp = tokio::net::TcpStream::connect(g.gw.addr())
        .await
        .expect("connect");
    tcp.write_all(
        format!("GET /agents/a/tasks/{id}/stream HTTP/1.1\r\nHost: gw\r\nX-Request-Id: lean-1\r\nAccept: text/event-stream\r\n\r\n")
            .as_bytes(),
    )
    .await
    .expect("request");
    upstream_open(&a, &id, 1).await;
    a.push_event(&id, "log", "{\"m\":\"lean\"}");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("lean\"}\n\n") {
        let n = tokio::time::timeout(WAIT, tcp.read(&mut buf))
            .await
            .expect("in time")
            .expect("read");
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got).to_string();
    let (head, body) = text.split_once("\r\n\r\n").expect("head");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    for h in [
        "content-type: text/event-stream",
        "cache-control: no-cache",
        "x-accel-buffering: no",
        "x-request-id: lean-1",
        "transfer-encoding: chunked",
        "connection: close",
    ] {
        assert!(head.to_ascii_lowercase().contains(h), "{h} in {head}");
    }
    assert!(!head.to_ascii_lowercase().contains("content-encoding"));
    // One chunk: size line, the event, CRLF.
    let (size, rest) = body.split_once("\r\n").expect("chunk size");
    let n = usize::from_str_radix(size, 16).expect("hex size");
    assert!(
        rest[..n].contains("event: log\ndata: {\"m\":\"lean\"}\n\n"),
        "{rest}"
    );
    // The task ends: the final event, then the last chunk, then the connection closes.
    assert_eq!(
        g.http
            .post_empty(&format!("/tasks/{id}/cancel"))
            .await
            .json()["status"],
        "CANCELLED"
    );
    let mut tail = Vec::new();
    tokio::time::timeout(WAIT, tcp.read_to_end(&mut tail))
        .await
        .expect("closed in time")
        .expect("read");
    let tail = String::from_utf8_lossy(&tail);
    assert!(tail.contains("event: status"), "{tail}");
    assert!(tail.ends_with("\r\n0\r\n\r\n"), "{tail:?}");
    // Errors and 204 on this path: complete answers with a length.
    let r = raw_request(
        g.gw.addr(),
        &format!("GET /tasks/{id}/stream HTTP/1.1\nHost: gw"),
        b"",
    )
    .await;
    assert_eq!(r.status, 204);
    let r = raw_request(
        g.gw.addr(),
        "GET /tasks/0b5a4c43-64c5-4bd1-a2a8-1ad2a3c2e0f4/stream HTTP/1.1\nHost: gw",
        b"",
    )
    .await;
    assert_eq!(r.status, 404);
    let j: Value = serde_json::from_slice(&r.body).expect("json error");
    assert_eq!(j["error"]["code"], "TASK_NOT_FOUND");
    let r = raw_request(
        g.gw.addr(),
        &format!("GET /tasks/{id}/stream HTTP/1.1\nBad Header: x"),
        b"",
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(
        g.metric(
            "a2a_gateway_requests_total",
            &[("route", "stream"), ("status", "204")]
        )
        .await
            >= 1.0
    );
}

/// What all task streams buffer together is bounded: past the budget, a stream that publishes
/// sheds its own oldest events; the others keep theirs.
#[tokio::test]
async fn the_replay_buffers_share_one_budget() {
    let a = agent().await;
    let g = gateway(&a, |cfg| cfg.streams.max_buffer_bytes = 8 * 1024).await;
    let (t1, t2) = (g.create_task("a").await, g.create_task("a").await);
    let mut s1 = subscribe(&g, &format!("/tasks/{t1}/stream"), &[]).await;
    let mut s2 = subscribe(&g, &format!("/tasks/{t2}/stream"), &[]).await;
    upstream_open(&a, &t1, 1).await;
    upstream_open(&a, &t2, 1).await;
    let line = "q".repeat(1000);
    for (t, s) in [(&t1, &mut s1), (&t2, &mut s2)] {
        for i in 0..6 {
            a.push_event(t, "log", &format!("{i} {line}"));
        }
        for _ in 0..6 {
            s.next_event(WAIT).await.expect("live event");
        }
    }
    let held = g.metric("a2a_gateway_stream_buffered_bytes", &[]).await;
    assert!(held <= 8.0 * 1024.0 + 1100.0, "{held}");
    // The first stream kept its history; the second shed its oldest.
    let history = |t: String| {
        let g = &g;
        async move {
            let mut late = subscribe(g, &format!("/tasks/{t}/stream"), &[]).await;
            let mut n = 0;
            while late.next_event(Duration::from_millis(300)).await.is_some() {
                n += 1;
            }
            n
        }
    };
    assert_eq!(history(t1.clone()).await, 6);
    let kept = history(t2.clone()).await;
    assert!((1..6).contains(&kept), "{kept}");
}

/// An agent whose stream keeps breaking the event-stream rules (a line over `max_event_bytes`
/// on every connection; an answer that is no event stream) is given up on after a bound:
/// subscribers get `event: upstream_error` with the reason (not `error`, which an EventSource
/// reports for its own connection errors) and the stream ends; a new subscriber within the
/// cool-off gets the same event at once, and the agent is not asked again.
#[tokio::test]
async fn an_agent_stream_that_keeps_breaking_the_rules_ends_with_upstream_error() {
    use a2a_sample_agent::{Reply, Route};
    let a = agent().await;
    let g = gateway(&a, |cfg| cfg.streams.max_event_bytes = 1024).await;
    let errors = [("agent", "a")];
    let id = g.create_task("a").await;
    let mut line = b"data: ".to_vec();
    line.extend(std::iter::repeat_n(b'x', 2048));
    line.extend_from_slice(b"\n\n");
    a.script(
        Route::Stream,
        Reply::Raw {
            status: 200,
            content_type: "text/event-stream".into(),
            body: Bytes::from(line),
        },
    );
    let mut s = subscribe(&g, &format!("/agents/a/tasks/{id}/stream"), &[]).await;
    let e = s
        .next_event(WAIT)
        .await
        .expect("told why, not left with pings");
    assert_eq!(e.event, "upstream_error", "{}", s.raw);
    let data: Value = serde_json::from_str(&e.data).expect("JSON data");
    let reason = data["reason"].as_str().expect("a reason");
    assert!(reason.contains("longer than 1024 bytes"), "{reason}");
    assert!(s.until_end(WAIT).await, "the stream ends");
    assert!(!s.failed, "a clean end, not a cut");
    assert!(!s.raw.contains("event: error"), "{}", s.raw);
    let tried = a.request_count(Route::Stream);
    assert_eq!(tried, 3, "given up after the bound");
    assert_eq!(
        g.metric("a2a_gateway_stream_upstream_errors_total", &errors)
            .await,
        1.0
    );
    // Within the cool-off, in either form: the same event at once, the agent not asked again.
    let mut again = subscribe(&g, &format!("/tasks/{id}/stream"), &[]).await;
    let e2 = again
        .next_event(Duration::from_secs(1))
        .await
        .expect("at once");
    assert_eq!(
        (e2.event.as_str(), e2.data.as_str()),
        ("upstream_error", e.data.as_str())
    );
    assert!(again.until_end(WAIT).await);
    assert_eq!(a.request_count(Route::Stream), tried);
    assert_eq!(
        g.metric("a2a_gateway_stream_upstream_errors_total", &errors)
            .await,
        1.0,
        "one give-up, counted once"
    );
    wait_for("the given-up upstream closed", || async {
        g.metric("a2a_gateway_stream_upstreams", &[]).await == 0.0
    })
    .await;

    // A stream that opened well, then reconnects answered with something else than a stream.
    a.clear_scripts();
    let id = g.create_task("a").await;
    let mut s = subscribe(&g, &format!("/agents/a/tasks/{id}/stream"), &[]).await;
    upstream_open(&a, &id, 1).await;
    a.push_event(&id, "log", "fine");
    assert_eq!(s.next_event(WAIT).await.expect("event").data, "fine");
    a.script(Route::Stream, Reply::Json(200, json!({"not": "a stream"})));
    a.close_streams(&id);
    let e = s.next_event(WAIT).await.expect("told why");
    assert_eq!(e.event, "upstream_error", "{}", s.raw);
    assert!(e.data.contains("application/json"), "{}", e.data);
    assert!(s.until_end(WAIT).await);
    assert_eq!(a.request_count(Route::Stream), tried + 4);
    assert_eq!(
        g.metric("a2a_gateway_stream_upstream_errors_total", &errors)
            .await,
        2.0
    );
}
