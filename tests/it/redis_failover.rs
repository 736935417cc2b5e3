//! Redis going away under load, and managed Redis: a Redis killed (-9) and restarted during a
//! bounded create load loses no acknowledged create and no webhook, and the creates it refused
//! never reached their agent; `rediss://` with an ACL user against a redis-server on TLS.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_gateway::config::{RedisConfig, SubscriberConfig};

use crate::support::hook::Hook;
use crate::support::redis_cluster::RedisCluster;
use crate::support::redis_server::RedisServer;
use crate::support::redis_tls::RedisTls;
use crate::support::*;

/// The must-show of the failover: 400 creates, 8 at a time, with Redis (AOF, `appendfsync
/// always`) killed after the first 100 and back a second later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_killed_under_create_load_loses_nothing_acknowledged() {
    let mut r = RedisServer::start_durable();
    let config = r.config("f:");
    under_load(config, || async move {
        r.kill();
        tokio::time::sleep(Duration::from_secs(1)).await;
        r.restart();
        r
    })
    .await;
}

/// A master of a cluster with a replica each (AOF, `wait_replicas = 1`) killed -9 under the
/// same load: its replica takes over, the old master comes back as the new one's replica, and
/// no create answered 2xx is lost with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_master_failed_over_under_create_load_loses_nothing_acknowledged() {
    let mut c = RedisCluster::start_with(1, true);
    let config = RedisConfig {
        cluster: true,
        urls: c.urls(),
        prefix: "f:".into(),
        wait_replicas: 1,
        ..Default::default()
    };
    under_load(config, || async move {
        let victim = c.masters()[0].clone();
        let first_slot = victim.slots.first().map(|r| r.0).expect("a slot");
        tokio::task::block_in_place(|| c.kill_node(victim.port));
        // The replica is promoted after the node timeout (2 s) and an election.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !c
            .masters()
            .iter()
            .any(|m| m.port != victim.port && m.owns(first_slot))
        {
            assert!(std::time::Instant::now() < deadline, "no replica took over");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // The promoted master has no replica: with wait_replicas = 1 its writes wait (creates
        // on the gateway are refused) until the old master is back, as its replica.
        tokio::task::block_in_place(|| c.restart_node(victim.port));
        c
    })
    .await;
}

/// 400 creates through a gateway on `redis`, 8 at a time, about 100 a second, with a
/// subscriber; after the first 100, `fail` breaks Redis and mends it (it returns what must
/// stay alive until the end). Every create answered 2xx is recorded and its webhook delivered;
/// every create refused (503 STORE_UNAVAILABLE, Retry-After) never reached the agent.
async fn under_load<F, Fut, Keep>(redis: RedisConfig, fail: F)
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Keep>,
{
    let hook = Hook::start().await;
    let a = agent().await;
    let g = Arc::new(
        TestGateway::start(&[("a", &a)], |cfg| {
            cfg.redis = Some(redis);
            cfg.subscribers = vec![SubscriberConfig::new("s", &hook.url())];
            cfg.webhooks.allow = vec!["127.0.0.1/32".into()];
            cfg.webhooks.retry_schedule_secs = vec![1; 10];
            // A delivery whose finish met the dead Redis stays pending: taken over after this.
            cfg.webhooks.visibility_timeout = Duration::from_secs(8);
            cfg.webhooks.timeout = Duration::from_secs(2);
        })
        .await,
    );
    wait_for("ready", || async {
        g.http.get("/readyz").await.status == 200
    })
    .await;
    let done = Arc::new(AtomicUsize::new(0));
    let accepted = Arc::new(Mutex::new(Vec::<(String, Option<String>)>::new()));
    let refused = Arc::new(AtomicUsize::new(0));
    let load = {
        let (g, done, accepted, refused) =
            (g.clone(), done.clone(), accepted.clone(), refused.clone());
        tokio::spawn(async move {
            use futures_util::stream::StreamExt;
            futures_util::stream::iter(0..400)
                .map(|_| {
                    let (g, done, accepted, refused) =
                        (g.clone(), done.clone(), accepted.clone(), refused.clone());
                    async move {
                        let res = g.http.post_task("a").await;
                        match res.status {
                            202 => {
                                let id = res.json()["task_id"].as_str().expect("id").to_owned();
                                let mark = res.header("x-a2a-ledger").map(str::to_owned);
                                accepted.lock().expect("lock").push((id, mark));
                            }
                            503 => {
                                assert_eq!(res.error_code(), "STORE_UNAVAILABLE", "{res:?}");
                                assert_eq!(res.header("retry-after"), Some("1"), "{res:?}");
                                refused.fetch_add(1, Ordering::Relaxed);
                            }
                            s => panic!("create answered {s}: {res:?}"),
                        }
                        done.fetch_add(1, Ordering::Relaxed);
                        // A bounded load: about 100 creates a second.
                        tokio::time::sleep(Duration::from_millis(60)).await;
                    }
                })
                .buffer_unordered(8)
                .collect::<Vec<()>>()
                .await;
        })
    };
    wait_for("the first 100 creates", || async {
        done.load(Ordering::Relaxed) >= 100
    })
    .await;
    let _keep = fail().await;
    load.await.expect("the load ran");
    let accepted = accepted.lock().expect("lock").clone();
    let refused = refused.load(Ordering::Relaxed);
    let pending = accepted.iter().filter(|(_, m)| m.is_some()).count();
    eprintln!(
        "failover under load: {} accepted ({pending} pending at first), {refused} refused",
        accepted.len()
    );
    assert!(
        refused > 0,
        "the failure refused no create: it was not exercised"
    );
    for (_, mark) in &accepted {
        assert!(
            mark.is_none() || mark.as_deref() == Some("pending"),
            "{mark:?}"
        );
    }
    // Every create answered 2xx is recorded (the pending ones in the background)...
    for (id, _) in &accepted {
        wait_for("a 2xx create is recorded", || async {
            g.http.get(&format!("/tasks/{id}")).await.status == 200
        })
        .await;
    }
    // ... and every 503 never reached the agent: the agent holds exactly the accepted tasks.
    let held: HashSet<String> = a.task_ids().into_iter().collect();
    let answered: HashSet<String> = accepted.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(held, answered);
    // Their webhooks are delivered.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let got: HashSet<String> = hook.received().iter().map(|d| d.change().0).collect();
        let missing: Vec<&String> = answered.difference(&got).collect();
        if missing.is_empty() {
            break;
        }
        if std::time::Instant::now() > deadline {
            let m = String::from_utf8_lossy(&g.http.get("/metrics").await.body).into_owned();
            let lines: Vec<&str> = m
                .lines()
                .filter(|l| l.contains("webhook") && !l.starts_with('#'))
                .collect();
            panic!(
                "{} of {} accepted creates' webhooks never came, e.g. {:?}; {lines:#?}",
                missing.len(),
                answered.len(),
                &missing[..missing.len().min(3)]
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn tls_config(r: &RedisTls, ca: bool) -> RedisConfig {
    RedisConfig {
        url: r.url(),
        ca_file: ca.then(|| r.ca_file().to_string_lossy().into_owned()),
        prefix: "s:".into(),
        ..Default::default()
    }
}

/// `rediss://` with an ACL user and `ca_file`: tasks are recorded and read back over TLS. The
/// same server without the CA is not trusted, and a wrong password is refused: neither gateway
/// is ready, and each names Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_with_an_acl_user_and_a_private_ca() {
    let r = RedisTls::start();
    let a = agent().await;
    let g = TestGateway::start(&[("a", &a)], |cfg| cfg.redis = Some(tls_config(&r, true))).await;
    g.ready().await;
    let created = g.http.post_task("a").await;
    assert_eq!(created.status, 202, "{created:?}");
    assert_eq!(
        created.header("x-a2a-ledger"),
        None,
        "recorded: {created:?}"
    );
    let id = created.json()["task_id"].as_str().expect("id").to_owned();
    a.set_status(&id, "COMPLETED", fields_for("COMPLETED"))
        .expect("task");
    let done = g.http.get(&format!("/tasks/{id}")).await;
    assert_eq!(done.json()["status"], "COMPLETED", "{done:?}");
    // Now answered from the ledger, over TLS.
    assert_eq!(
        g.http
            .get(&format!("/tasks/{id}"))
            .await
            .header("x-a2a-source"),
        Some("ledger")
    );

    for (what, cfg) in [
        ("no CA", tls_config(&r, false)),
        ("a wrong password", {
            let mut c = tls_config(&r, true);
            c.url = c.url.replace(r.password(), "wrong-password");
            c
        }),
    ] {
        let other = TestGateway::start(&[("a", &a)], |c| c.redis = Some(cfg)).await;
        wait_for("the card is in", || async {
            other.http.get("/readyz").await.json()["missing"] == serde_json::json!(["redis"])
        })
        .await;
        let refused = other.http.post_task("a").await;
        assert_eq!(refused.status, 503, "{what}: {refused:?}");
        let text = format!("{refused:?}");
        assert!(!text.contains(r.password()), "{what}: {text}");
    }
}

/// `wait_replicas = 1`: a create is answered only once a replica holds its record. With the
/// replica gone, the create that finds it gone is passed on `pending`, the next ones are refused
/// before their agent, and `/readyz` names Redis; the replica back, the pending task is recorded
/// (and replicated) and creates go through again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_replicas_holds_answers_until_a_replica_has_the_write() {
    let master = RedisServer::start_durable();
    let mut replica = RedisServer::start_replica_of(&master);
    let a = agent().await;
    let g = TestGateway::start(&[("a", &a)], |cfg| {
        let mut r = master.config("w:");
        r.wait_replicas = 1;
        r.wait_timeout = Duration::from_millis(300);
        cfg.redis = Some(r);
    })
    .await;
    wait_for("ready with a replica", || async {
        g.http.get("/readyz").await.status == 200
    })
    .await;
    let first = g.http.post_task("a").await;
    assert_eq!(first.status, 202, "{first:?}");
    assert_eq!(first.header("x-a2a-ledger"), None, "{first:?}");
    // The replica has it: read it there.
    let id = first.json()["task_id"].as_str().expect("id").to_owned();
    let on_replica = replica.cli(&["--scan", "--pattern", &format!("w:*task:{id}")]);
    assert!(on_replica.contains(&id), "{on_replica:?}");
    replica.kill();
    let down = g.http.post_task("a").await;
    assert_eq!(down.status, 202, "{down:?}");
    assert_eq!(down.header("x-a2a-ledger"), Some("pending"), "{down:?}");
    let pending = down.json()["task_id"].as_str().expect("id").to_owned();
    let held = a.task_ids().len();
    let refused = g.http.post_task("a").await;
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.error_code(), "STORE_UNAVAILABLE");
    assert_eq!(
        a.task_ids().len(),
        held,
        "a refused create reached the agent"
    );
    assert_eq!(g.http.get("/readyz").await.status, 503);
    replica.restart();
    wait_for("ready again with the replica back", || async {
        g.http.get("/readyz").await.status == 200
    })
    .await;
    wait_for("the pending create is recorded", || async {
        g.http.get(&format!("/tasks/{pending}")).await.status == 200
    })
    .await;
    let again = g.http.post_task("a").await;
    assert_eq!(again.status, 202, "{again:?}");
    assert_eq!(again.header("x-a2a-ledger"), None, "{again:?}");
}
