//! Webhook delivery across real gateway processes on one real Redis: a gateway killed with
//! SIGKILL while thousands of deliveries are queued or in flight loses none of them, and two
//! gateways racing conflicting updates for the same tasks never move a terminal task.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use crate::support::hook::Hook;
use crate::support::process::GwProc;
use crate::support::redis_server::RedisServer;
use crate::support::*;
use a2a_sample_agent::SampleAgent;
use serde_json::Value;

pub(crate) fn config(
    redis: &str,
    a: &SampleAgent,
    hook: &Hook,
    concurrency: usize,
) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    write!(
        f,
        r#"
listen = "127.0.0.1:0"
workers = 1
[[agents]]
name = "a"
url = "{agent}"
ingest_token = "{TOKEN}"
[redis]
{redis}prefix = "p:"
[webhooks]
allow = ["127.0.0.1/32"]
retry_schedule_secs = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
timeout_ms = 1000
visibility_timeout_secs = 6
concurrency = {concurrency}
[[subscribers]]
name = "s"
url = "{hook}"
"#,
        agent = a.base_url(),
        hook = hook.url(),
    )
    .expect("write config");
    f
}

/// Run `f` over `items` with `n` at a time.
async fn each_concurrently<T, F, Fut>(items: Vec<T>, n: usize, f: F)
where
    F: Fn(T) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    use futures_util::stream::StreamExt;
    futures_util::stream::iter(items.into_iter().map(f))
        .buffer_unordered(n)
        .collect::<Vec<()>>()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_with_thousands_queued_loses_no_delivery() {
    let r = RedisServer::start();
    kill_9_loses_no_delivery(&r.toml()).await;
}

/// A gateway killed (-9) with thousands of deliveries queued; another started on the same
/// Redis (`redis`: the body of its `[redis]` table) delivers every one, in order per task.
pub(crate) async fn kill_9_loses_no_delivery(redis: &str) {
    let hook = Hook::start().await;
    // A slow subscriber: deliveries pile up, and some are in flight at the kill. 700 ms, under
    // the 1 s delivery timeout: at most 32 / 0.7 s delivered a second, so most are still
    // queued at the kill even on a loaded machine (at 100 ms, one slow to set up delivered
    // 2,286 of the 3,000 first).
    hook.set_delay(Duration::from_millis(700));
    let a = agent().await;
    let cfg = config(redis, &a, &hook, 32);
    // Both logged (warn and above): a failure below says what each gateway saw.
    let mut first = GwProc::spawn_logged(cfg.path());
    first.ready().await;
    let began = std::time::Instant::now();

    // 1,000 tasks, three changes each: created through the gateway, then two pushes.
    let tasks: Vec<String> = {
        let ids = Arc::new(std::sync::Mutex::new(Vec::new()));
        each_concurrently((0..1000).collect(), 32, |_| {
            let (ids, http, first) = (ids.clone(), first.http.clone(), &first);
            async move {
                let r = http.post_task("a").await;
                assert_eq!(r.status, 202, "{r:?}\n{}", tail(&first.log()));
                assert_eq!(
                    r.header("x-a2a-ledger"),
                    None,
                    "recorded: {r:?}\n{}",
                    tail(&first.log())
                );
                let id = r.json()["task_id"].as_str().expect("id").to_owned();
                ids.lock().expect("lock").push(id);
            }
        })
        .await;
        let v = ids.lock().expect("lock").clone();
        v
    };
    eprintln!("1000 tasks created in {:?}", began.elapsed());
    let now = a2a_gateway::protocol::time::now_ms();
    for (status, at) in [("WORKING", now + 1), ("COMPLETED", now + 2)] {
        let docs: Vec<Value> = tasks.iter().map(|id| doc_at(&a, id, status, at)).collect();
        each_concurrently(docs, 32, |d| {
            let p = &first;
            async move {
                let r = p.push(&d).await;
                assert_eq!(r.status, 202, "{r:?}\n{}", tail(&p.log()));
            }
        })
        .await;
    }
    let before_kill = hook.count();
    first.kill();
    let first_log = first.log();
    eprintln!(
        "2000 changes pushed; killed at {:?} with {before_kill} of 3000 delivered",
        began.elapsed()
    );
    assert!(
        before_kill < 2000,
        "most deliveries were still queued at the kill ({before_kill} of 3000 delivered)"
    );

    hook.set_delay(Duration::ZERO);
    let mut second = GwProc::spawn_logged(cfg.path());
    second.ready().await;
    let expected: HashSet<(String, String)> = tasks
        .iter()
        .flat_map(|id| ["SUBMITTED", "WORKING", "COMPLETED"].map(|s| (id.clone(), s.to_owned())))
        .collect();
    let delivered = within(Duration::from_secs(60), || async {
        hook.changes().is_superset(&expected)
    })
    .await;
    if !delivered {
        let at = standing(&hook, &expected, began, &first_log, &mut second).await;
        panic!("every change delivered: {at}");
    }
    // What the dead process held is taken over once the visibility timeout (6 s) has run.
    // Those deliveries may already have reached the subscriber before the kill (it records
    // on receipt, then answers late), so the set above can be complete before the takeover:
    // wait for it rather than assume it came first.
    let reclaimed = within(Duration::from_secs(30), || async {
        second
            .metric("a2a_gateway_webhook_reclaimed_total", &[])
            .await
            >= 1.0
    })
    .await;
    if !reclaimed {
        let at = standing(&hook, &expected, began, &first_log, &mut second).await;
        panic!("the dead worker's deliveries reclaimed: {at}");
    }
    let drained = within(Duration::from_secs(30), || async {
        second.metric("a2a_gateway_webhook_queue_depth", &[]).await == 0.0
    })
    .await;
    if !drained {
        let at = standing(&hook, &expected, began, &first_log, &mut second).await;
        panic!("the queue drained: {at}");
    }
    let received = hook.received();
    let unique: HashSet<String> = received.iter().map(|d| d.msg_id()).collect();
    assert_eq!(unique.len(), 3000, "one webhook-id per change");
    let duplicates = received.len() - unique.len();
    eprintln!(
        "kill -9 with {} of 3000 delivered: all 3000 delivered after restart, {duplicates} duplicates",
        before_kill
    );
    // In order per task, duplicates aside.
    let seen = hook.lanes();
    for (t, lane) in seen {
        assert_eq!(lane, ["SUBMITTED", "WORKING", "COMPLETED"], "{t}");
    }
}

/// Where the restarted gateway stands, for a wait that failed: what never reached the
/// subscriber, its queue's gauges (from one scrape, bounded in time: a gateway that died or
/// hangs must not hide the rest), whether it exited, and both gateways' logs.
async fn standing(
    hook: &Hook,
    expected: &HashSet<(String, String)>,
    began: std::time::Instant,
    first_log: &str,
    second: &mut GwProc,
) -> String {
    let missing = expected.difference(&hook.changes()).count();
    let scrape = second
        .http
        .try_send(hyper::Method::GET, "/metrics", &[], bytes::Bytes::new());
    let gauges = match tokio::time::timeout(Duration::from_secs(5), scrape).await {
        Ok(Ok(r)) => {
            let text = String::from_utf8_lossy(&r.body);
            let m = |family: &str| metric_value(&text, family, &[]);
            format!(
                "reclaimed {}, queue depth {}, retrying {}, dead {}",
                m("a2a_gateway_webhook_reclaimed_total"),
                m("a2a_gateway_webhook_queue_depth"),
                m("a2a_gateway_webhook_retry_scheduled"),
                m("a2a_gateway_webhook_dead_letters"),
            )
        }
        Ok(Err(e)) => format!("no metrics: {e}"),
        Err(_) => "no metrics within 5 s".to_owned(),
    };
    format!(
        "after {:?}: {missing} changes never delivered, {} deliveries in all, {gauges}, \
         the restarted gateway exited: {:?}\nthe killed gateway's log:\n{}\n\
         the restarted gateway's log:\n{}",
        began.elapsed(),
        hook.count(),
        second.exit_status(),
        tail(first_log),
        tail(&second.log()),
    )
}

/// The last 40 lines of a gateway's log.
fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

const TERMINAL: [&str; 3] = ["COMPLETED", "FAILED", "CANCELLED"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_replicas_never_move_a_terminal_task() {
    let r = RedisServer::start();
    let hook = Hook::start().await;
    let a = agent().await;
    let cfg = config(&r.toml(), &a, &hook, 32);
    let (p1, p2) = (GwProc::spawn(cfg.path()), GwProc::spawn(cfg.path()));
    p1.ready().await;
    p2.ready().await;
    let mut tasks = Vec::new();
    for i in 0..200 {
        let p = if i % 2 == 0 { &p1 } else { &p2 };
        let r = p.http.post_task("a").await;
        assert_eq!(r.status, 202, "{r:?}");
        tasks.push(r.json()["task_id"].as_str().expect("id").to_owned());
    }
    let now = a2a_gateway::protocol::time::now_ms();
    // Round one: every task gets WORKING and the three terminal states at once, spread over
    // both replicas. Round two: late news (an older WORKING, a newer terminal) for every task.
    let mut accepted: BTreeMap<String, Vec<(String, i64)>> = BTreeMap::new();
    let mut refused = 0usize;
    for round in [
        vec![
            ("WORKING", 5),
            ("COMPLETED", 10),
            ("FAILED", 11),
            ("CANCELLED", 12),
        ],
        vec![("WORKING", 6), ("FAILED", 30), ("COMPLETED", 31)],
    ] {
        let mut work = Vec::new();
        for (i, id) in tasks.iter().enumerate() {
            for (j, (status, dt)) in round.iter().enumerate() {
                work.push((id.clone(), *status, now + dt, (i + j) % 2));
            }
        }
        let results = Arc::new(std::sync::Mutex::new(Vec::new()));
        each_concurrently(work, 64, |(id, status, at, which)| {
            let p = if which == 0 { &p1 } else { &p2 };
            let d = doc_at(&a, &id, status, at);
            let results = results.clone();
            async move {
                let r = p.push(&d).await;
                results
                    .lock()
                    .expect("lock")
                    .push((id, status, at, r.status));
            }
        })
        .await;
        for (id, status, at, code) in results.lock().expect("lock").drain(..) {
            match code {
                202 => accepted
                    .entry(id)
                    .or_default()
                    .push((status.to_owned(), at)),
                409 => refused += 1,
                other => panic!("{id} {status}: unexpected {other}"),
            }
        }
    }
    let mut regressions = 0;
    for id in &tasks {
        let (r1, r2) = (
            p1.http.get(&format!("/tasks/{id}")).await.json(),
            p2.http.get(&format!("/tasks/{id}")).await.json(),
        );
        assert_eq!(r1["status"], r2["status"], "{id}: replicas agree");
        let terminals: Vec<&(String, i64)> = accepted
            .get(id)
            .map(|v| {
                v.iter()
                    .filter(|(s, _)| TERMINAL.contains(&s.as_str()))
                    .collect()
            })
            .unwrap_or_default();
        if terminals.len() > 1 {
            regressions += 1;
        }
        if let Some((s, _)) = terminals.first() {
            if r1["status"] != s.as_str() {
                regressions += 1;
            }
        }
    }
    assert_eq!(regressions, 0, "terminal regressions");
    // Every task has its terminal state, and the round-two news was all refused.
    assert!(refused >= 3 * 200, "{refused} refused");
    // The subscriber heard each task's changes in acceptance order, ending at its one
    // terminal state.
    let expected: usize = tasks.len() + accepted.values().map(Vec::len).sum::<usize>();
    wait_for_within("deliveries", Duration::from_secs(30), || async {
        hook.count() >= expected
    })
    .await;
    let mut lanes: HashMap<String, Vec<String>> = HashMap::new();
    for d in hook.received() {
        let (t, s) = d.change();
        lanes.entry(t).or_default().push(s);
    }
    for id in &tasks {
        let lane = &lanes[id];
        let terminal_at = lane.iter().position(|s| TERMINAL.contains(&s.as_str()));
        if let Some(i) = terminal_at {
            assert_eq!(
                i,
                lane.len() - 1,
                "{id}: news after a terminal state: {lane:?}"
            );
        }
    }
    let refused_metric = p1
        .metric("a2a_gateway_notifications_refused_total", &[])
        .await
        + p2.metric("a2a_gateway_notifications_refused_total", &[])
            .await;
    assert_eq!(refused_metric as usize, refused);
}
