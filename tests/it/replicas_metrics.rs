//! An agent's replicas in its metrics (issue 49): `agent_in_flight`, `agent_ejected`,
//! `agent_ejections_total` and `upstream_duration_seconds` carry a `replica` label
//! (`host:port`), and a replica that left `urls` has its series removed once its grace is over.

use std::time::Duration;

use a2a_gateway::config::Config;
use a2a_gateway::Gateway;
use a2a_sample_agent::{card_for, AgentOptions};

use crate::support::{agent_with, wait_for_within, Http};

/// The lines of the per-replica series of agent `c` that name `replica`.
async fn series_of(http: &Http, replica: &str) -> Vec<String> {
    let text = String::from_utf8_lossy(&http.get("/metrics").await.body).into_owned();
    let label = format!("replica=\"{replica}\"");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            [
                "a2a_gateway_agent_in_flight{",
                "a2a_gateway_agent_ejected{",
                "a2a_gateway_agent_ejections_total{",
                "a2a_gateway_upstream_duration_seconds_count{",
            ]
            .iter()
            .any(|m| l.starts_with(m))
        })
        .filter(|l| l.contains("agent=\"c\"") && l.contains(&label))
        .map(str::to_owned)
        .collect()
}

fn config(urls: &[String]) -> Config {
    let list: Vec<String> = urls.iter().map(|u| format!("{u:?}")).collect();
    Config::parse(&format!(
        "listen = \"127.0.0.1:0\"\n[[agents]]\nname = \"c\"\nreplica_grace_ms = 800\nurls = [{}]\n",
        list.join(", ")
    ))
    .unwrap_or_else(|p| panic!("config refused: {p:?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn each_replica_has_its_series_and_a_departed_ones_go_after_its_grace() {
    let card = card_for("Echo", None);
    let with = || AgentOptions {
        card: card.clone(),
        ..AgentOptions::default()
    };
    let (a, b) = (agent_with(with()).await, agent_with(with()).await);
    let address = |base: String| {
        base.trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned()
    };
    let (at_a, at_b) = (address(a.base_url()), address(b.base_url()));
    let gw = Gateway::start(config(&[a.base_url(), b.base_url()]))
        .await
        .expect("gateway starts");
    let http = Http::new(format!("http://{}", gw.addr()));
    http.ready().await;
    // Tasks until both replicas have answered one: each then has an upstream duration.
    wait_for_within(
        "a task on each replica",
        Duration::from_secs(20),
        || async {
            http.create_task("c").await;
            !a.task_ids().is_empty() && !b.task_ids().is_empty()
        },
    )
    .await;
    for at in [&at_a, &at_b] {
        let lines = series_of(&http, at).await;
        for metric in [
            "agent_in_flight{",
            "agent_ejected{",
            "agent_ejections_total{",
            "upstream_duration_seconds_count{",
        ] {
            assert!(
                lines.iter().any(|l| l.contains(metric)),
                "no {metric} series of replica {at}: {lines:?}"
            );
        }
    }

    // b leaves `urls`: gone through its grace (its series kept: it may come back), then its
    // series are removed; a's stay.
    gw.reload(config(&[a.base_url()])).await.expect("applied");
    let left = std::time::Instant::now();
    wait_for_within(
        "the departed replica's series removed",
        Duration::from_secs(5),
        || async { series_of(&http, &at_b).await.is_empty() },
    )
    .await;
    assert!(
        left.elapsed() >= Duration::from_millis(700),
        "removed {:?} after it left, before its grace of 800 ms",
        left.elapsed()
    );
    assert!(
        !series_of(&http, &at_a).await.is_empty(),
        "the staying replica lost its series"
    );
    let v = http.get("/agents").await.json();
    let replicas = v["agents"][0]["replicas"].clone();
    assert_eq!(
        replicas.as_array().map(Vec::len),
        Some(1),
        "the departed replica is still listed after its grace: {replicas}"
    );
}
