//! Every Redis guarantee again, on a real Redis Cluster of three masters started by the test
//! (`support::redis_cluster`): the Lua and Rust rules agree, racing replicas never regress a
//! terminal task, webhooks arrive in order per task, a gateway killed -9 with deliveries queued
//! loses none, `/events` carries changes across replicas, the keys spread over all three
//! masters, and a resharding under traffic loses nothing.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use a2a_gateway::config::{Config, RedisConfig, SubscriberConfig};
use a2a_gateway::ledger::RedisLedger;
use a2a_gateway::store::Store;
use serde_json::Value;

use crate::support::hook::Hook;
use crate::support::redis_cluster::RedisCluster;
use crate::support::sse::Events;
use crate::support::*;

/// A `[redis]` table for the cluster, keys under `prefix`.
fn config(c: &RedisCluster, prefix: &str) -> RedisConfig {
    RedisConfig {
        cluster: true,
        urls: c.urls(),
        prefix: prefix.into(),
        ..Default::default()
    }
}

async fn ledger(c: &RedisCluster, prefix: &str) -> RedisLedger {
    let store = Store::new(&config(c, prefix)).expect("a cluster store");
    store.connect_now().await.expect("connects to the cluster");
    RedisLedger::new(store, Duration::from_secs(60))
}

fn with_cluster(c: &RedisCluster, prefix: &str) -> impl FnOnce(&mut Config) {
    let cfg = config(c, prefix);
    move |g| g.redis = Some(cfg)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_rules_hold_and_keys_spread_over_every_master() {
    let c = RedisCluster::start();
    crate::redis_ledger::agreement(&ledger(&c, "t:").await).await;
    // Its own prefix: the behaviour checks the counts of every state.
    crate::redis_ledger::behaviour(&ledger(&c, "b:").await).await;
    crate::redis_ledger::race([
        Arc::new(ledger(&c, "r:").await),
        Arc::new(ledger(&c, "r:").await),
    ])
    .await;
    // 50 raced tasks over 16 partitions: every master holds some of them.
    let per = c.keys_per_master("r:*task:*");
    assert_eq!(per.len(), 3, "{per:?}");
    assert!(
        per.iter().all(|&(_, n)| n > 0),
        "keys on every master: {per:?}"
    );
    assert_eq!(per.iter().map(|&(_, n)| n).sum::<usize>(), 50, "{per:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_down_then_up_gets_everything_in_order_on_a_cluster() {
    let c = RedisCluster::start();
    crate::webhooks::down_then_up(Some(config(&c, "w:"))).await;
    // The ten tasks' lanes and tokens are on more than one master.
    let per = c.keys_per_master("w:*wh:stream");
    assert!(per.iter().filter(|&&(_, n)| n > 0).count() >= 2, "{per:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gone_disables_and_dead_letters_redrive_on_a_cluster() {
    let c = RedisCluster::start();
    crate::webhooks::gone_disables(Some(config(&c, "g:"))).await;
    crate::webhooks::dead_letters(Some(config(&c, "d:"))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_with_thousands_queued_loses_no_delivery_on_a_cluster() {
    let c = RedisCluster::start();
    let urls: Vec<String> = c.urls().iter().map(|u| format!("{u:?}")).collect();
    let toml = format!("cluster = true\nurls = [{}]\n", urls.join(", "));
    crate::webhook_processes::kill_9_loses_no_delivery(&toml).await;
}

/// Changes ingested through one replica reach `/events` clients of the other: the apply script
/// publishes on its partition's shard channel, and every replica subscribes to all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_cross_replicas_on_a_cluster() {
    let c = RedisCluster::start();
    let a = agent().await;
    let g1 = TestGateway::start(&[("a", &a)], |cfg| {
        ingest(cfg);
        with_cluster(&c, "e:")(cfg);
    })
    .await;
    let g2 = TestGateway::start(&[("a", &a)], |cfg| {
        ingest(cfg);
        with_cluster(&c, "e:")(cfg);
    })
    .await;
    g1.ready().await;
    g2.ready().await;
    let mut events = Events::new(g2.http.open("/events").await);
    // Enough tasks to land in partitions on every master.
    let mut want: HashMap<String, Vec<&str>> = HashMap::new();
    for _ in 0..12 {
        let id = g1.create_task("a").await;
        for s in ["WORKING", "COMPLETED"] {
            assert_eq!(g1.push(&moved(&a, &id, s)).await.status, 202);
        }
        want.insert(id, vec!["SUBMITTED", "WORKING", "COMPLETED"]);
    }
    let mut got: HashMap<String, Vec<String>> = HashMap::new();
    while got.values().map(Vec::len).sum::<usize>() < 36 {
        let e = events
            .next_event(Duration::from_secs(10))
            .await
            .expect("a change from the other replica");
        assert_eq!(e.event, "task.status.updated");
        let d: Value = serde_json::from_str(&e.data).expect("json");
        let id = d["data"]["task_id"].as_str().expect("task_id").to_owned();
        let status = d["data"]["status"].as_str().expect("status").to_owned();
        got.entry(id).or_default().push(status);
    }
    for (id, statuses) in &want {
        assert_eq!(
            got.get(id).map(|v| v.as_slice()),
            Some(&statuses.iter().map(|s| s.to_string()).collect::<Vec<_>>()[..]),
            "{id}"
        );
    }
}

/// Slots move from one master to another while tasks are created and pushed through a
/// gateway with a subscriber: every create answered 2xx is recorded with its final state, and
/// every change is delivered in order; a create refused (503) never reached the agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resharding_under_traffic_loses_nothing() {
    let c = Arc::new(RedisCluster::start());
    let hook = Hook::start().await;
    let a = agent().await;
    let g = Arc::new(
        TestGateway::start(&[("a", &a)], |cfg| {
            ingest(cfg);
            with_cluster(&c, "m:")(cfg);
            cfg.subscribers = vec![SubscriberConfig::new("s", &hook.url())];
            cfg.webhooks.allow = vec!["127.0.0.1/32".into()];
            cfg.webhooks.retry_schedule_secs = vec![1; 10];
        })
        .await,
    );
    g.ready().await;
    let masters = c.masters();
    let (from, to) = (masters[0].port, masters[1].port);
    let moving = {
        let c = c.clone();
        tokio::task::spawn_blocking(move || c.reshard(from, to, 2000))
    };
    let mut accepted = Vec::new();
    let mut refused = 0;
    let started = std::time::Instant::now();
    // Traffic for as long as the slots move, and at least 150 tasks.
    while !moving.is_finished() || accepted.len() < 150 {
        let r = g.http.post_task("a").await;
        match r.status {
            202 => {
                let id = r.json()["task_id"].as_str().expect("id").to_owned();
                for s in ["WORKING", "COMPLETED"] {
                    let p = g.push(&moved(&a, &id, s)).await;
                    assert!(p.status == 202 || p.status == 503, "{p:?}");
                    if p.status == 503 {
                        // Refused, not recorded: the agent pushes again, as agents retry.
                        wait_for("the push is taken", || async {
                            g.push(&moved(&a, &id, s)).await.status == 202
                        })
                        .await;
                    }
                }
                accepted.push(id);
            }
            503 => refused += 1,
            s => panic!("create answered {s}: {r:?}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "resharding took too long"
        );
    }
    moving
        .await
        .expect("join")
        .expect("the resharding succeeded");
    // Every task the agent holds was answered 202: no refused create reached it.
    let held: HashSet<String> = a.task_ids().into_iter().collect();
    let answered: HashSet<String> = accepted.iter().cloned().collect();
    assert_eq!(held, answered, "{refused} refused");
    for id in &accepted {
        let r = g.http.get(&format!("/tasks/{id}")).await;
        assert_eq!(r.status, 200, "{id} recorded: {r:?}");
        assert_eq!(r.json()["status"], "COMPLETED", "{id}");
    }
    let want = accepted.len() * 3;
    wait_for_within(
        "every change delivered",
        Duration::from_secs(60),
        || async { hook.changes().len() >= want },
    )
    .await;
    let lanes = hook.lanes();
    for id in &accepted {
        assert_eq!(
            lanes.get(id).map(Vec::as_slice),
            Some(
                &[
                    "SUBMITTED".to_owned(),
                    "WORKING".to_owned(),
                    "COMPLETED".to_owned()
                ][..]
            ),
            "{id}"
        );
    }
    let after = c.masters();
    assert!(
        after
            .iter()
            .any(|m| m.port == to && m.slot_count() > masters[1].slot_count()),
        "slots moved: {after:?}"
    );
    eprintln!(
        "resharded 2000 slots under traffic: {} tasks accepted, {refused} creates refused (503)",
        accepted.len()
    );
}
