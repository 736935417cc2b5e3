//! A real Prometheus (Debian's `prometheus`) scraping the gateway with the shipped
//! deploy/prometheus.yml: its `authorization` credentials get the scrape in; a job without them
//! is refused with 401, and Prometheus says so; the Redis, connection and process series are
//! stored; the alert rules it names load and evaluate.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use a2a_gateway::config::Right;

use crate::auth::client;
use crate::support::redis_server::RedisServer;
use crate::support::*;

const KEY: &str = "prometheus-key-0123456789abcdef";

/// How the shipped file finds compose's replicas: replaced by the gateway under test.
const COMPOSE_DISCOVERY: &str = "    dns_sd_configs:\n      - names: [\"gateway\"]\n        type: A\n        port: 8080\n        refresh_interval: 15s\n";

struct Prometheus(Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_with_the_shipped_authorization_config() {
    // On Redis, so the Redis series are there to scrape too.
    let redis = RedisServer::start();
    let (_a, g) = single("a", |cfg| {
        cfg.clients = vec![client("prometheus", KEY, &["*"], &[Right::Metrics])];
        cfg.redis = Some(redis.config("scrape:"));
    })
    .await;
    let dir = tempfile::tempdir().expect("temp dir");
    let key_file = dir.path().join("a2a-gateway.key");
    std::fs::write(&key_file, KEY).expect("key file");
    let shipped = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus.yml"),
    )
    .expect("deploy/prometheus.yml");
    let target = format!("[\"{}\"]", g.gw.addr());
    let rules =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus/alerts.yml");
    let rules = rules.display().to_string();
    let config = shipped
        .replace(
            "scrape_interval: 15s",
            "scrape_interval: 1s\n  evaluation_interval: 1s",
        )
        .replace(
            "/etc/prometheus/a2a-gateway.key",
            &key_file.display().to_string(),
        )
        .replace("/etc/prometheus/a2a-gateway-alerts.yml", &rules)
        // Compose's DNS discovery of the replicas, as the commented plain-host variant.
        .replace(
            COMPOSE_DISCOVERY,
            &format!("    static_configs:\n      - targets: {target}\n"),
        );
    assert!(
        shipped.contains(COMPOSE_DISCOVERY) && config.contains(&target),
        "the shipped file's discovery: {shipped}"
    );
    assert!(
        config.contains(&rules),
        "the shipped file's rule_files: {shipped}"
    );
    let config = format!(
        "{config}  - job_name: no-credentials\n    static_configs:\n      - targets: {target}\n"
    );
    let config_file = dir.path().join("prometheus.yml");
    std::fs::write(&config_file, config).expect("config");
    let port = free_port();
    let prom = Prometheus(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus runs (Debian's prometheus package; scripts/test installs it)"),
    );
    let api = Http::new(format!("http://127.0.0.1:{port}"));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut health = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "Prometheus scraped both jobs in time"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        // Refused until Prometheus listens (slow to start on a busy machine): ask again.
        let asked = api.try_send(
            hyper::Method::GET,
            "/api/v1/targets",
            &[],
            bytes::Bytes::new(),
        );
        let Ok(Ok(r)) = tokio::time::timeout(Duration::from_secs(2), asked).await else {
            continue;
        };
        if r.status != 200 {
            continue;
        }
        let targets: Vec<(String, String, String)> = r.json()["data"]["activeTargets"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                let s = |v: &Value| v.as_str().unwrap_or("").to_owned();
                (s(&t["labels"]["job"]), s(&t["health"]), s(&t["lastError"]))
            })
            .collect();
        if targets.len() == 2 && targets.iter().all(|(_, h, _)| h != "unknown") {
            break targets;
        }
    };
    health.sort();
    assert_eq!(health[0].0, "a2a-gateway");
    assert_eq!(health[0].1, "up", "{health:?}");
    assert_eq!(health[1].0, "no-credentials");
    assert_eq!(health[1].1, "down", "{health:?}");
    assert!(health[1].2.contains("401"), "{health:?}");
    // What it scraped is stored: the gateway's own count of the scrapes, by client.
    let q = "/api/v1/query?query=a2a_gateway_requests_total%7Broute%3D%22metrics%22%2Cclient%3D%22prometheus%22%7D";
    wait_for("a stored sample of the scrapes", || {
        let api = api.clone();
        async move {
            let v: Value = api.get(q).await.json();
            v["data"]["result"][0]["value"][1]
                .as_str()
                .and_then(|s| s.parse::<f64>().ok())
                .is_some_and(|n| n >= 1.0)
        }
    })
    .await;
    // The series operators could not see before, stored (`None`: any value; the process's CPU
    // counts whole seconds and is 0 this early): Prometheus's own `up` for the job the
    // gateway alert reads, Redis, open connections, and the process collector's standard names.
    for (query, want) in [
        ("up%7Bjob%3D%22a2a-gateway%22%7D", Some(1.0)),
        ("a2a_gateway_redis_up", Some(1.0)),
        ("a2a_gateway_redis_command_duration_seconds_count", None),
        (
            "a2a_gateway_connections_open%7Btransport%3D%22http%22%7D",
            None,
        ),
        ("process_resident_memory_bytes", None),
        ("process_open_fds", None),
        ("process_cpu_seconds_total", None),
        ("process_threads", None),
    ] {
        let path = format!("/api/v1/query?query={query}");
        wait_for(&format!("Prometheus stored {query}"), || {
            let (api, path) = (api.clone(), path.clone());
            async move {
                let v: Value = api.get(&path).await.json();
                v["data"]["result"][0]["value"][1]
                    .as_str()
                    .and_then(|s| s.parse::<f64>().ok())
                    .is_some_and(|n| want.map_or(n >= 0.0, |w| n == w))
            }
        })
        .await;
    }
    // The shipped alert rules are loaded and evaluate on the live data without an error.
    let want = std::fs::read_to_string(&rules)
        .expect("deploy/prometheus/alerts.yml")
        .matches("- alert:")
        .count();
    assert!(want > 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let got: Value = api.get("/api/v1/rules").await.json();
        let rules: Vec<&Value> = got["data"]["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["rules"].as_array().into_iter().flatten())
            .collect();
        let evaluated = rules
            .iter()
            .all(|r| r["type"] == "alerting" && r["health"] == "ok");
        if rules.len() == want && evaluated {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{want} alert rules loaded and evaluated without error: {got}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(prom);
}
