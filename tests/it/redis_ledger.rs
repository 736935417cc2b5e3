//! The Redis ledger against a real redis-server of the test's own: the Lua rule agrees with the
//! Rust rule on every case, replicas racing on one task never regress it, tasks created through
//! one gateway are served by another, and a Redis restarted empty is survived without a restart.

use std::sync::Arc;
use std::time::Duration;

use crate::support::redis_server::RedisServer;
use crate::support::*;
use a2a_gateway::ledger::{decide, MemoryLedger, Origin, RedisLedger, TaskLedger};
use a2a_gateway::protocol::task::{Head, Status, Verdict};
use bytes::Bytes;
use serde_json::json;

async fn redis_ledger(r: &RedisServer, retention: Duration) -> RedisLedger {
    RedisLedger::connect(&r.url(), "t:", retention)
        .await
        .expect("redis ledger connects")
}

fn doc(id: &str, h: Head) -> Bytes {
    Bytes::from(format!(
        "{{\"task_id\":\"{id}\",\"status\":\"{}\",\"at\":{}}}",
        h.status.as_str(),
        h.updated_ms
    ))
}

/// Every (recorded state, update state, older/same/newer, same/other agent) through the Lua
/// script and through `ledger::decide`: the verdicts and the standing records must agree.
#[tokio::test]
async fn the_lua_rule_agrees_with_the_rust_rule_on_every_case() {
    let r = RedisServer::start();
    agreement(&redis_ledger(&r, Duration::from_secs(60)).await).await;
}

/// The replica that holds a task (`Origin::replica`) is recorded by the first news that names
/// it and never replaced, in both stores: a later answer from another replica (a gateway that
/// balanced a call wrongly) must not move the task, and news that names none keeps it. A
/// context's replica is the last that answered in it, for its time.
#[tokio::test]
async fn a_tasks_replica_is_recorded_once_in_both_stores() {
    use a2a_gateway::protocol::task::TaskRef;
    let r = RedisServer::start();
    let redis = redis_ledger(&r, Duration::from_secs(60)).await;
    let memory = MemoryLedger::new(
        1000,
        Duration::from_secs(60),
        a2a_gateway::ledger::Evictions::unregistered(),
    );
    let ledgers: [&dyn TaskLedger; 2] = [&redis, &memory];
    for l in ledgers {
        let at = |status, ms| Head {
            status,
            updated_ms: ms,
        };
        let task = |h: Head| TaskRef {
            task_id: "rp-1".into(),
            head: h,
            context: None,
            content: 0,
        };
        let from = |replica| Origin {
            replica,
            ..Origin::default()
        };
        // First seen by a push that names no replica: none yet.
        let h = at(Status::Submitted, 1);
        let a = l
            .apply_traced("a", &task(h), doc("rp-1", h), None, Origin::default())
            .await
            .expect("apply");
        assert_eq!(a.record.replica, None);
        // The create's answer, a duplicate of it, still records where it lives.
        let a = l
            .apply_traced(
                "a",
                &task(h),
                doc("rp-1", h),
                Some("c"),
                from(Some("10.0.0.1:9000")),
            )
            .await
            .expect("apply");
        assert_eq!(a.verdict, Verdict::Duplicate);
        assert_eq!(a.record.replica.as_deref(), Some("10.0.0.1:9000"));
        // Another replica's later news moves the state, never the replica.
        let h = at(Status::Working, 2);
        let a = l
            .apply_traced(
                "a",
                &task(h),
                doc("rp-1", h),
                None,
                from(Some("10.0.0.2:9000")),
            )
            .await
            .expect("apply");
        assert!(matches!(a.verdict, Verdict::Transition { .. }));
        assert_eq!(a.record.replica.as_deref(), Some("10.0.0.1:9000"));
        let got = l.get("rp-1").await.expect("get").expect("held");
        assert_eq!(got.replica.as_deref(), Some("10.0.0.1:9000"));
        assert_eq!(got.owner.as_deref(), Some("c"));
        // A context lives where it was last answered, until its time is up.
        let ttl = Duration::from_millis(300);
        assert_eq!(l.context_replica("a", "ctx-1").await.expect("read"), None);
        l.set_context_replica("a", "ctx-1", "10.0.0.1:9000", ttl)
            .await
            .expect("kept");
        l.set_context_replica("a", "ctx-1", "10.0.0.2:9000", ttl)
            .await
            .expect("kept");
        let home = l.context_replica("a", "ctx-1").await.expect("read");
        assert_eq!(home.as_deref(), Some("10.0.0.2:9000"));
        assert_eq!(l.context_replica("b", "ctx-1").await.expect("read"), None);
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(l.context_replica("a", "ctx-1").await.expect("read"), None);
    }
}

/// The agreement above, on any Redis ledger: with content digests too (`TaskRef::content`,
/// 0 for none), which turn a live task's same-time update with other content into a refresh.
pub(crate) async fn agreement(l: &RedisLedger) {
    use a2a_gateway::protocol::task::TaskRef;
    let mut n = 0;
    let contents = [(0, 0), (0x11, 0x11), (0x11, 0x22), (0, 0x22), (0x11, 0)];
    for rec in Status::ALL {
        for upd in Status::ALL {
            for dt in [-1i64, 0, 1] {
                for agent in ["a", "b"] {
                    for (had, content) in contents {
                        n += 1;
                        let id = format!("case-{n}");
                        let first = Head {
                            status: rec,
                            updated_ms: 1_000,
                        };
                        let update = Head {
                            status: upd,
                            updated_ms: 1_000 + dt,
                        };
                        let task_ref = |head, content| TaskRef {
                            task_id: id.clone(),
                            head,
                            context: None,
                            content,
                        };
                        let a = l
                            .apply_traced(
                                "a",
                                &task_ref(first, had),
                                doc(&id, first),
                                None,
                                Origin::default(),
                            )
                            .await
                            .expect("apply");
                        assert_eq!(a.verdict, Verdict::New);
                        let got = l
                            .apply_traced(
                                agent,
                                &task_ref(update, content),
                                doc(&id, update),
                                None,
                                Origin::default(),
                            )
                            .await
                            .expect("apply");
                        let want = decide(Some(("a", first, had)), agent, update, content);
                        assert_eq!(
                            got.verdict, want,
                            "{rec:?} then {upd:?} dt={dt} agent={agent} content {had:x} -> {content:x}"
                        );
                        let standing = if want.is_accepted() { update } else { first };
                        assert_eq!(got.record.head, standing);
                        assert_eq!(got.record.task, doc(&id, standing));
                        let read = l.get(&id).await.expect("get").expect("recorded");
                        assert_eq!(read.head, standing);
                        assert_eq!(&*read.agent, "a");
                    }
                }
            }
        }
    }
    // 8 states (AUTH_REQUIRED and REJECTED of official A2A beside the six) × 8 × 3 × 2 × 5.
    assert_eq!(n, 1920);
}

/// The same behaviour from both backends, through the trait.
pub(crate) async fn behaviour(l: &dyn TaskLedger) {
    let h = |status, updated_ms| Head { status, updated_ms };
    assert!(l.get("nope").await.expect("get").is_none());
    let created = l
        .apply(
            "a",
            "t1",
            h(Status::Submitted, 1),
            doc("t1", h(Status::Submitted, 1)),
            Some("alice"),
        )
        .await
        .expect("apply");
    assert_eq!(created.record.owner.as_deref(), Some("alice"));
    let v = l
        .apply(
            "a",
            "t1",
            h(Status::Working, 2),
            doc("t1", h(Status::Working, 2)),
            None,
        )
        .await
        .expect("apply");
    assert_eq!(
        v.verdict,
        Verdict::Transition {
            from: Status::Submitted
        }
    );
    assert_eq!(
        v.record.owner.as_deref(),
        Some("alice"),
        "news keeps the owner"
    );
    // An owner is never replaced, not even by another create's answer naming the task.
    let again = l
        .apply(
            "a",
            "t1",
            h(Status::Working, 2),
            doc("t1", h(Status::Working, 2)),
            Some("mallory"),
        )
        .await
        .expect("apply");
    assert_eq!(again.verdict, Verdict::Duplicate);
    assert_eq!(again.record.owner.as_deref(), Some("alice"));
    let read = l.get("t1").await.expect("get").expect("recorded");
    assert_eq!(read.owner.as_deref(), Some("alice"));
    l.apply(
        "a",
        "t2",
        h(Status::Failed, 1),
        doc("t2", h(Status::Failed, 1)),
        None,
    )
    .await
    .expect("apply");
    assert_eq!(l.get("t2").await.expect("get").expect("t2").owner, None);
    // A push recorded t3 first; the create's answer, a duplicate of it, still makes it carol's.
    // Another agent's answer about t3 claims nothing.
    let push = h(Status::Submitted, 5);
    l.apply("a", "t3", push, doc("t3", push), None)
        .await
        .expect("push");
    let foreign = l
        .apply("b", "t3", push, doc("t3", push), Some("eve"))
        .await
        .expect("foreign");
    assert!(matches!(foreign.verdict, Verdict::Refused(_)));
    assert_eq!(l.get("t3").await.expect("get").expect("t3").owner, None);
    let answer = l
        .apply("a", "t3", push, doc("t3", push), Some("carol"))
        .await
        .expect("answer");
    assert_eq!(answer.verdict, Verdict::Duplicate);
    assert_eq!(answer.record.owner.as_deref(), Some("carol"));
    assert_eq!(
        l.get("t3")
            .await
            .expect("get")
            .expect("t3")
            .owner
            .as_deref(),
        Some("carol")
    );
    let mut want = [0u64; Status::COUNT];
    want[Status::Working.index()] = 1;
    want[Status::Failed.index()] = 1;
    want[Status::Submitted.index()] = 1;
    assert_eq!(l.counts().await.expect("counts"), want);
    assert!(l.artifact("art-1").await.expect("artifact").is_none());
    l.note_artifacts("a", "t1", vec!["art-1".into(), "art-2".into()])
        .await
        .expect("note");
    let listed = l
        .artifact("art-2")
        .await
        .expect("artifact")
        .expect("listed");
    assert_eq!((&*listed.agent, &*listed.task_id), ("a", "t1"));
}

#[tokio::test]
async fn both_backends_behave_alike() {
    let r = RedisServer::start();
    behaviour(&redis_ledger(&r, Duration::from_secs(60)).await).await;
    let evictions = a2a_gateway::ledger::Evictions::unregistered();
    behaviour(&MemoryLedger::new(1000, Duration::from_secs(60), evictions)).await;
}

/// File bindings (issue 43) in both stores: an opaque id per (task, URL), the same each time
/// and, on Redis, on every replica; another task's or another URL's is another id; what an id
/// is bound to reads back; a final task's binding expires with the retention, a live one's
/// does not; an id never bound is nothing.
#[tokio::test]
async fn file_bindings_behave_alike_in_both_stores() {
    use a2a_gateway::ledger::FileScope;
    let r = RedisServer::start();
    let short = Duration::from_millis(300);
    let (one, two) = (redis_ledger(&r, short).await, redis_ledger(&r, short).await);
    let evictions = a2a_gateway::ledger::Evictions::unregistered();
    let memory = MemoryLedger::new(1000, short, evictions);
    let live = |task| FileScope {
        agent: "a",
        task: Some(task),
        owner: None,
        live: true,
    };
    let urls = vec![
        "http://127.0.0.1:18103/files/secret.bin".to_owned(),
        "HTTP://LOCALHOST:18103/files/other.bin".to_owned(),
    ];
    for (l, replica) in [
        (&one as &dyn TaskLedger, &two as &dyn TaskLedger),
        (&memory, &memory),
    ] {
        let ids = l.bind_files(live("a/t1"), &urls).await.expect("bound");
        assert_eq!(ids.len(), 2);
        assert_ne!(ids[0], ids[1]);
        assert!(ids.iter().all(|id| !id.contains("18103")), "{ids:?}");
        assert_eq!(
            replica
                .bind_files(live("a/t1"), &urls)
                .await
                .expect("bound"),
            ids,
            "the same on every replica, every time"
        );
        let other = l.bind_files(live("a/t2"), &urls[..1]).await.expect("bound");
        assert_ne!(other[0], ids[0], "another task, another id");
        let got = replica.file(&ids[0]).await.expect("read").expect("bound");
        assert_eq!(
            (
                &*got.agent,
                got.task.as_deref(),
                got.owner.as_deref(),
                &*got.url
            ),
            ("a", Some("a/t1"), None, urls[0].as_str())
        );
        let taskless = FileScope {
            agent: "a",
            task: None,
            owner: Some("alice"),
            live: true,
        };
        let mine = l.bind_files(taskless, &urls[..1]).await.expect("bound");
        let got = l.file(&mine[0]).await.expect("read").expect("bound");
        assert_eq!((got.task, got.owner.as_deref()), (None, Some("alice")));
        let done = l
            .bind_files(
                FileScope {
                    live: false,
                    ..live("a/t3")
                },
                &urls[..1],
            )
            .await
            .expect("bound");
        assert!(l.file(&done[0]).await.expect("read").is_some());
        wait_for("a final task's binding expires", || async {
            l.file(&done[0]).await.expect("read").is_none()
        })
        .await;
        assert!(
            l.file(&ids[1]).await.expect("read").is_some(),
            "a live task's stays"
        );
        assert!(l
            .file("AAAAAAAAAAAAAAAAAAAAAA")
            .await
            .expect("read")
            .is_none());
    }
}

#[tokio::test]
async fn terminal_tasks_expire_after_the_retention() {
    let r = RedisServer::start();
    let l = redis_ledger(&r, Duration::from_millis(300)).await;
    let done = Head {
        status: Status::Completed,
        updated_ms: 5,
    };
    let live = Head {
        status: Status::Working,
        updated_ms: 5,
    };
    l.apply("a", "done", done, doc("done", done), None)
        .await
        .expect("apply");
    l.apply("a", "live", live, doc("live", live), None)
        .await
        .expect("apply");
    wait_for("the terminal task expires", || async {
        l.get("done").await.expect("get").is_none()
    })
    .await;
    assert!(l.get("live").await.expect("get").is_some());
    let counts = l.counts().await.expect("counts");
    assert_eq!(counts[Status::Completed.index()], 0);
    assert_eq!(counts[Status::Working.index()], 1);
}

/// Two replicas (two connections) race conflicting updates on the same tasks: each task ends in
/// exactly one terminal state, and every later read returns that state.
#[tokio::test]
async fn racing_replicas_never_regress_a_terminal_task() {
    let r = RedisServer::start();
    race([
        Arc::new(redis_ledger(&r, Duration::from_secs(60)).await),
        Arc::new(redis_ledger(&r, Duration::from_secs(60)).await),
    ])
    .await;
}

/// Two replicas race conflicting updates (see above).
pub(crate) async fn race(replicas: [Arc<RedisLedger>; 2]) {
    let tasks: Vec<String> = (0..50).map(|i| format!("race-{i}")).collect();
    let updates = [
        Head {
            status: Status::Working,
            updated_ms: 10,
        },
        Head {
            status: Status::InputRequired,
            updated_ms: 20,
        },
        Head {
            status: Status::Working,
            updated_ms: 30,
        },
        Head {
            status: Status::Completed,
            updated_ms: 40,
        },
        Head {
            status: Status::Failed,
            updated_ms: 40,
        },
        Head {
            status: Status::Cancelled,
            updated_ms: 35,
        },
        Head {
            status: Status::Working,
            updated_ms: 50,
        },
    ];
    let mut joins = Vec::new();
    for (i, replica) in replicas.iter().enumerate() {
        for (j, u) in updates.iter().enumerate() {
            let (l, tasks, u) = (replica.clone(), tasks.clone(), *u);
            joins.push(tokio::spawn(async move {
                let mut first_terminal = Vec::new();
                for id in &tasks {
                    let a = l.apply("a", id, u, doc(id, u), None).await.expect("apply");
                    if a.verdict.is_accepted() && u.status.is_terminal() {
                        first_terminal.push(id.clone());
                    }
                }
                let _ = (i, j);
                first_terminal
            }));
        }
    }
    let mut terminal_accepts = std::collections::HashMap::<String, usize>::new();
    for j in joins {
        for id in j.await.expect("join") {
            *terminal_accepts.entry(id).or_default() += 1;
        }
    }
    for id in &tasks {
        let rec = replicas[0].get(id).await.expect("get").expect("recorded");
        if rec.head.status.is_terminal() {
            assert_eq!(
                terminal_accepts.get(id),
                Some(&1),
                "{id}: exactly one terminal update accepted"
            );
        }
        // A terminal state once recorded is what every replica reads from then on.
        for l in &replicas {
            for u in updates {
                let after = l.apply("a", id, u, doc(id, u), None).await.expect("apply");
                if rec.head.status.is_terminal() {
                    assert!(
                        !after.verdict.is_accepted(),
                        "{id}: {u:?} moved a terminal task"
                    );
                    assert_eq!(after.record.head, rec.head);
                }
            }
        }
    }
}

fn with_redis(r: &RedisServer) -> impl FnOnce(&mut a2a_gateway::config::Config) + '_ {
    move |cfg| {
        cfg.redis = Some(a2a_gateway::config::RedisConfig {
            url: r.url(),
            prefix: "gw:".into(),
            ..Default::default()
        });
    }
}

/// A task created through one replica is served and guarded by another.
#[tokio::test]
async fn replicas_share_the_ledger() {
    let r = RedisServer::start();
    let a = agent().await;
    let g1 = TestGateway::start(&[("scripts", &a)], with_redis(&r)).await;
    let g2 = TestGateway::start(&[("scripts", &a)], with_redis(&r)).await;
    g1.ready().await;
    g2.ready().await;
    let id = g1.http.create_task("scripts").await;
    // Agent-less GET on the other replica: it learns the agent from the shared ledger.
    let got = g2.http.get(&format!("/tasks/{id}")).await;
    assert_eq!(got.status, 200, "{got:?}");
    a.set_status(
        &id,
        "COMPLETED",
        json!({"output": {"summary": "s", "filename": "avg.py"}}),
    )
    .expect("task");
    assert_eq!(
        g2.http.get(&format!("/tasks/{id}")).await.json()["status"],
        "COMPLETED"
    );
    // The first replica refuses a cancel from the shared record, without the agent.
    let cancels = a.request_count(sample::Route::CancelTask);
    let c = g1.http.post_empty(&format!("/tasks/{id}/cancel")).await;
    assert_eq!(c.status, 409, "{c:?}");
    assert_eq!(a.request_count(sample::Route::CancelTask), cancels);
}

/// Redis killed: the create that finds it gone after its agent accepted is passed on marked
/// `pending` (a 503 would make the client create it twice), and the creates after it are
/// refused with 503 STORE_UNAVAILABLE and Retry-After before their agent is called; routes that need
/// the ledger answer 503 (not a hang, not a panic). Redis back, empty: the gateway serves again
/// without a restart, and the pending task is recorded in the background.
#[tokio::test]
async fn a_redis_restarted_empty_is_survived_without_a_restart() {
    let mut r = RedisServer::start();
    let (a, g) = single("scripts", |cfg| {
        with_redis(&r)(cfg);
    })
    .await;
    let body = json!({"input": good_input()});
    let before = g.http.post_json("/agents/scripts/tasks", &body).await;
    assert_eq!(before.status, 202);
    assert_eq!(before.header("x-a2a-ledger"), None);
    r.kill();
    let down = g.http.post_json("/agents/scripts/tasks", &body).await;
    assert_eq!(down.status, 202, "{down:?}");
    assert_eq!(down.header("x-a2a-ledger"), Some("pending"));
    let id = down.json()["task_id"].as_str().expect("id").to_owned();
    let held = a.task_ids().len();
    for _ in 0..5 {
        let refused = g.http.post_json("/agents/scripts/tasks", &body).await;
        assert_eq!(refused.status, 503, "{refused:?}");
        assert_eq!(refused.error_code(), "STORE_UNAVAILABLE");
        assert_eq!(refused.header("retry-after"), Some("1"));
    }
    assert_eq!(
        a.task_ids().len(),
        held,
        "a refused create reached the agent"
    );
    let read = g.http.get(&format!("/tasks/{id}")).await;
    assert_eq!(read.status, 503, "{read:?}");
    assert_eq!(read.error_code(), "STORE_UNAVAILABLE");
    let ready = g.http.get("/readyz").await;
    assert_eq!(ready.status, 503, "{ready:?}");
    r.restart_empty();
    wait_for("the gateway uses the restarted redis", || async {
        let r = g.http.post_json("/agents/scripts/tasks", &body).await;
        r.status == 202 && r.header("x-a2a-ledger").is_none()
    })
    .await;
    // The task created while Redis was down is recorded in the background, with its owner.
    wait_for("the pending task is recorded", || async {
        g.http.get(&format!("/tasks/{id}")).await.status == 200
    })
    .await;
    let m = String::from_utf8_lossy(&g.http.get("/metrics").await.body).into_owned();
    assert!(
        m.contains("a2a_gateway_pending_records_total{agent=\"scripts\",outcome=\"recorded\"} 1"),
        "{m}"
    );
}

/// A gateway started on data it cannot use refuses to start, saying what to do: webhook
/// deliveries queued under the previous single-tag layout (which it would never send), or a
/// keyspace written with another partition count (whose tasks it would never find).
#[tokio::test]
async fn data_of_another_layout_is_refused_at_start() {
    use a2a_gateway::config::{AgentConfig, Config};
    let r = RedisServer::start();
    let a = agent().await;
    let start = |prefix: &str, partitions: u16| {
        let mut cfg = Config::with_agents(
            "127.0.0.1:0".parse().expect("addr"),
            vec![AgentConfig::new("a", &a.base_url())],
        );
        let mut redis = r.config(prefix);
        redis.partitions = partitions;
        cfg.redis = Some(redis);
        a2a_gateway::Gateway::start(cfg)
    };
    let cli = |args: &[&str]| r.cli(args);
    // A delivery queued by the previous version, under its default prefix.
    cli(&[
        "XADD",
        "a2a:{gw}:wh:stream",
        "*",
        "s",
        "sub",
        "t",
        "task",
        "a",
        "0",
    ]);
    cli(&["SET", "a2a:{gw}:wh:queued", "1"]);
    let refused = start("a2a:", 16).await.err().expect("refused");
    let text = refused.to_string();
    assert!(
        text.contains("previous layout") && text.contains("a2a:{gw}:"),
        "{text}"
    );
    assert!(text.contains("1 queued"), "{text}");
    // Delivered (here: deleted), the same config starts, and writes its layout.
    cli(&["DEL", "a2a:{gw}:wh:stream", "a2a:{gw}:wh:queued"]);
    let g = start("a2a:", 16).await.expect("starts");
    drop(g);
    let refused = start("a2a:", 8).await.err().expect("refused");
    let text = refused.to_string();
    assert!(text.contains("partitions"), "{text}");
    // Another prefix is another keyspace.
    assert!(start("other:", 8).await.is_ok());
}
