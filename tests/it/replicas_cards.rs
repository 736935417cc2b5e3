//! One card per agent (issue 49): a replica whose card differs from the agent's in skills,
//! capabilities or interfaces (for Clawpedia agents: capabilities or schemas) is
//! `card_mismatch` on `/agents` and takes no new work.

use serde_json::{json, Value};

use a2a_gateway::config::Config;
use a2a_gateway::Gateway;
use a2a_sample_agent::{card_for, AgentOptions};

use crate::support::{agent_with, wait_for, Http};

/// `address -> health` of agent `name`'s replicas on `GET /agents`.
async fn healths(http: &Http, name: &str) -> Vec<(String, String)> {
    crate::replicas_ops::replicas_of(http, None, name)
        .await
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
            (s("address"), s("health"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replica_serving_another_card_takes_no_new_work() {
    let card = card_for("Echo", None);
    let mut upgraded = card.clone();
    upgraded["capabilities"]
        .as_array_mut()
        .expect("capabilities")
        .push(json!("summarize-v2"));
    let with = |card: Value| AgentOptions {
        card,
        ..AgentOptions::default()
    };
    let old = agent_with(with(card)).await;
    let new = agent_with(with(upgraded)).await;
    let address = |base: String| {
        base.trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned()
    };
    let (old_at, new_at) = (address(old.base_url()), address(new.base_url()));
    let cfg = Config::parse(&format!(
        "listen = \"127.0.0.1:0\"\n[[agents]]\nname = \"c\"\nurls = [{:?}, {:?}]\n",
        old.base_url(),
        new.base_url()
    ))
    .unwrap_or_else(|p| panic!("config refused: {p:?}"));
    let gw = Gateway::start(cfg).await.expect("gateway starts");
    let http = Http::new(format!("http://{}", gw.addr()));
    http.ready().await;

    wait_for("the upgraded replica to be card_mismatch", || async {
        let h = healths(&http, "c").await;
        h.contains(&(new_at.clone(), "card_mismatch".into()))
            && h.contains(&(old_at.clone(), "ok".into()))
    })
    .await;
    // The agent keeps the card the first replica serves.
    let v = http.get("/agents").await.json();
    let c = v["agents"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["name"] == "c"))
        .expect("agent c")
        .clone();
    assert!(!c.to_string().contains("summarize-v2"), "{c}");

    for _ in 0..12 {
        let id = http.create_task("c").await;
        assert!(
            old.task(&id).is_some(),
            "task {id} not on the serving replica"
        );
        assert!(
            new.task(&id).is_none(),
            "task {id} went to the card_mismatch replica"
        );
    }
}
