//! Push deliveries shared fairly between clients (`[webhooks] max_in_flight_per_client`): 300
//! tasks of one client whose push receiver accepts and never answers hold that client's share
//! of the delivery slots, never the pool, and another client's delivery to a healthy receiver
//! arrives within a second of its change, on the in-process store and on Redis.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::stream::StreamExt;
use serde_json::json;

use a2a_gateway::config::Config;

use crate::a2a_gateway::{a2a_agent, gateway};
use crate::support::a2a_calls::{message, rpc, two_clients, ALICE, BOB, OPS};
use crate::support::a2a_script::{task, Answer, ScriptedAgent};
use crate::support::hook::Hook;
use crate::support::redis_server::RedisServer;
use crate::support::{metric_value, wait_for_within, Http};

/// Tasks of the client whose receiver hangs.
const HANGING: usize = 300;

/// A receiver that accepts every connection and never answers (nor reads): each delivery to it
/// holds its slot until the gateway's attempt times out. Counts the connections it holds.
struct Hanging {
    url: String,
    held: Arc<AtomicUsize>,
    _server: tokio::task::JoinHandle<()>,
}

impl Hanging {
    async fn start() -> Hanging {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/hang", listener.local_addr().expect("addr"));
        let held = Arc::new(AtomicUsize::new(0));
        let count = held.clone();
        let server = tokio::spawn(async move {
            let mut kept = Vec::new();
            while let Ok((conn, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                kept.push(conn);
            }
        });
        Hanging {
            url,
            held,
            _server: server,
        }
    }
}

/// Every SendMessage makes a new task in a new context, final at once: its inline config
/// hears of it once.
async fn one_task_per_message() -> ScriptedAgent {
    let n = Arc::new(AtomicUsize::new(0));
    ScriptedAgent::start(Arc::new(move |method, _| match method {
        "SendMessage" => {
            // A context of its own: contexts are their first client's.
            let n = n.fetch_add(1, Ordering::SeqCst);
            let t = task(
                &format!("t-{n}"),
                &format!("ctx-{n}"),
                "TASK_STATE_COMPLETED",
            );
            Answer::Result(json!({ "task": t }))
        }
        _ => Answer::Status(500, b"not scripted".to_vec()),
    }))
    .await
}

/// SendMessage as `token` with an inline push config to `url`; the task's id.
async fn send_with_config(http: &Http, token: &str, url: &str) -> String {
    let mut m = message("go", json!({}));
    m["configuration"] = json!({"taskPushNotificationConfig": {"url": url}});
    let sent = rpc(http, "e", Some(token), "SendMessage", m).await;
    sent["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {sent}"))
        .to_owned()
}

async fn another_clients_delivery_is_not_held_behind_hanging_receivers(
    tweak: impl FnOnce(&mut Config),
) {
    let agent = one_task_per_message().await;
    let (_gw, http) = gateway(vec![a2a_agent("e", &agent.base)], |cfg| {
        two_clients(cfg);
        cfg.webhooks.allow = vec!["127.0.0.1/32".into()];
        // Longer than the test: the attempts that hang are the first ones, never retries.
        cfg.webhooks.timeout = Duration::from_secs(30);
        tweak(cfg);
    })
    .await;
    let share = 64 / 4;
    let hanging = Hanging::start().await;
    let hook = Hook::start().await;
    // Alice's 300 tasks, each with a config at the receiver that hangs.
    futures_util::stream::iter(0..HANGING)
        .map(|_| send_with_config(&http, ALICE, &hanging.url))
        .buffer_unordered(16)
        .collect::<Vec<String>>()
        .await;
    wait_for_within(
        "alice's share of deliveries hangs",
        Duration::from_secs(10),
        || async { hanging.held.load(Ordering::SeqCst) >= share },
    )
    .await;
    // Bob's deliveries, one at a time, while alice's hang.
    let mut waited = Vec::new();
    for i in 0..5 {
        let at = Instant::now();
        let id = send_with_config(&http, BOB, &hook.url()).await;
        wait_for_within(
            "bob's delivery arrives",
            Duration::from_secs(15),
            || async {
                hook.received()
                    .iter()
                    .any(|d| d.json()["task"]["id"] == id.as_str())
            },
        )
        .await;
        let got = hook
            .received()
            .iter()
            .find(|d| d.json()["task"]["id"] == id.as_str())
            .map(|d| d.at)
            .expect("received");
        waited.push(got.duration_since(at));
        assert_eq!(hook.received().len(), i + 1, "one delivery per change");
    }
    eprintln!("bob's deliveries behind {HANGING} hanging ones of alice's: {waited:?}");
    for w in &waited {
        assert!(
            *w < Duration::from_secs(1),
            "bob's delivery waited {w:?} behind alice's hanging receivers: {waited:?}"
        );
    }
    // Alice holds her share and no more: the rest of her deliveries wait for it.
    let held = hanging.held.load(Ordering::SeqCst);
    assert_eq!(held, share, "alice's attempts in flight");
    let metrics = String::from_utf8_lossy(&http.get_as("/metrics", OPS).await.body).into_owned();
    let deferred = metric_value(
        &metrics,
        "a2a_gateway_webhook_deliveries_total",
        &[
            ("subscriber", "a2a_push"),
            ("agent", "e"),
            ("outcome", "deferred"),
        ],
    );
    assert!(deferred > 0.0, "alice's jobs past her share were put back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_clients_push_delivery_is_not_held_behind_300_hanging_receivers() {
    another_clients_delivery_is_not_held_behind_hanging_receivers(|_| {}).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_clients_push_delivery_is_not_held_behind_300_hanging_receivers_on_redis() {
    let r = RedisServer::start();
    another_clients_delivery_is_not_held_behind_hanging_receivers(|cfg| {
        cfg.redis = Some(r.config("shares:"));
    })
    .await;
}
