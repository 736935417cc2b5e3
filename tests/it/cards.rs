//! Agent cards through the real gateway (in-process, port 0) in front of real sample agents on
//! loopback: fetching at start, the catalog, serving the cached card, refresh with ETag and
//! Cache-Control, stale serving, unavailable agents, slow agents, redaction of `auth_header`,
//! and the card-fetch metrics.

use std::time::Duration;

use crate::support::*;
use a2a_gateway::config::Config;
use a2a_gateway::protocol::time::parse_strict;
use sample::{card_for, Reply, Route, SampleAgent};
use serde_json::{json, Value};

/// Short enough that refresh tests finish quickly, long enough not to hammer the agents.
const REFRESH: Duration = Duration::from_millis(500);

/// A secret that must never leave the gateway.
const SECRET: &str = "Authorization: Bearer SECRET-dG9rZW4tZm9yLXdlYmhvb2tz";
/// The part of it that identifies it wherever it would turn up.
const SECRET_TOKEN: &str = "SECRET-dG9rZW4tZm9yLXdlYmhvb2tz";

/// Where the cards with a notification_config point (nothing listens; the agent's deliveries fail).
const HOOK: &str = "http://127.0.0.1:9/hooks/a2a";

fn refresh_all(every: Duration) -> impl FnOnce(&mut Config) {
    move |cfg| {
        for a in &mut cfg.agents {
            a.refresh = every;
        }
    }
}

/// The catalog entry of the agent with route name `name`.
async fn entry(g: &TestGateway, name: &str) -> Value {
    let r = g.http.get("/agents").await;
    assert_eq!(r.status, 200, "{r:?}");
    let list = r.json()["agents"]
        .as_array()
        .cloned()
        .expect("agents array");
    list.into_iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in the catalog"))
}

async fn card_state(g: &TestGateway, name: &str) -> String {
    entry(g, name).await["card_state"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn wait_for_state(g: &TestGateway, name: &str, state: &str) {
    wait_for(&format!("card of {name} {state}"), || async {
        card_state(g, name).await == state
    })
    .await;
}

async fn served_card(g: &TestGateway, name_or_id: &str) -> Resp {
    g.http
        .get(&format!("/agents/{name_or_id}/agent-card.json"))
        .await
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// A valid card with one field replaced, to make it invalid in exactly that place.
fn card_with(field: &str, value: Value) -> Value {
    let mut card = card_for("Broken Agent", None);
    card[field] = value;
    card
}

async fn agent_serving(card: Value) -> SampleAgent {
    let a = agent().await;
    a.set_card(card);
    a
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    String::from_utf8_lossy(haystack).contains(needle)
}

// --- fetched at start, the catalog, the served card ---

#[tokio::test]
async fn cards_are_fetched_at_start_and_listed_in_the_catalog() {
    let (a, b) = (agent().await, agent().await);
    b.set_card(card_for("Second Agent", None));
    let started = now_ms();
    let g = TestGateway::start(&[("first", &a), ("second", &b)], |_| {}).await;
    g.ready().await;
    for (name, agent) in [("first", &a), ("second", &b)] {
        assert!(
            agent.card_fetches() >= 1,
            "{name} was never asked for its card"
        );
        let e = entry(&g, name).await;
        let card = agent.card();
        assert_eq!(e["agent_id"], card["agent_id"], "{e}");
        assert_eq!(e["display_name"], card["display_name"], "{e}");
        assert_eq!(e["capabilities"], card["capabilities"], "{e}");
        assert_eq!(e["card_state"], "fresh", "{e}");
        let fetched = e["fetched_at"].as_str().expect("fetched_at is a string");
        let at = parse_strict(fetched)
            .unwrap_or_else(|| panic!("fetched_at {fetched:?} is not YYYY-MM-DDTHH:MM:SS.sssZ"));
        assert!(
            started - 1 <= at && at <= now_ms(),
            "fetched_at {fetched} is not the time of this fetch"
        );
    }
}

#[tokio::test]
async fn the_cached_card_is_served_under_the_route_name() {
    let (a, g) = single("scripts", |_| {}).await;
    let r = served_card(&g, "scripts").await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        r.header("content-type")
            .is_some_and(|ct| ct.starts_with("application/json")),
        "{r:?}"
    );
    assert_eq!(r.json(), a.card());
    assert_eq!(r.header("x-a2a-card-state"), Some("fresh"));
}

#[tokio::test]
async fn the_cached_card_is_served_under_the_agent_id() {
    let (a, g) = single("scripts", |_| {}).await;
    let r = served_card(&g, &a.agent_id()).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json(), a.card());
}

#[tokio::test]
async fn tasks_can_be_created_under_the_agent_id() {
    let (a, g) = single("scripts", |_| {}).await;
    let id = g.http.create_task(&a.agent_id()).await;
    assert!(a.task(&id).is_some(), "the agent never got task {id}");
}

#[tokio::test]
async fn the_agent_less_create_accepts_the_agent_id() {
    let (a, g) = single("scripts", |_| {}).await;
    let r = g
        .http
        .post_json(
            "/tasks",
            &json!({"agent": a.agent_id(), "input": good_input()}),
        )
        .await;
    assert_eq!(r.status, 202, "{r:?}");
    let id = r.json()["task_id"].as_str().expect("task_id").to_owned();
    assert!(a.task(&id).is_some(), "the agent never got task {id}");
}

#[tokio::test]
async fn the_configured_card_path_is_fetched() {
    let a = agent_with(sample::AgentOptions {
        card_path: "/.well-known/agent-card.json".into(),
        ..Default::default()
    })
    .await;
    let g = TestGateway::start(&[("scripts", &a)], |cfg| {
        cfg.agents[0].card_path = "/.well-known/agent-card.json".into();
    })
    .await;
    g.ready().await;
    assert_eq!(card_state(&g, "scripts").await, "fresh");
    assert_eq!(served_card(&g, "scripts").await.json(), a.card());
    assert_eq!(a.request_count(Route::Other), 0, "{:?}", a.requests());
}

#[tokio::test]
async fn an_unknown_name_has_no_card() {
    let (_a, g) = single("scripts", |_| {}).await;
    let r = served_card(&g, "nobody").await;
    assert_eq!(r.status, 404, "{r:?}");
    assert_eq!(r.error_code(), "UNKNOWN_AGENT");
}

// --- refresh ---

#[tokio::test]
async fn a_changed_card_is_picked_up_on_refresh() {
    let (a, g) = single("scripts", refresh_all(REFRESH)).await;
    let before = entry(&g, "scripts").await["display_name"].clone();
    let mut card = a.card();
    card["display_name"] = json!("Renamed Script Generator");
    assert_ne!(before, card["display_name"]);
    a.set_card(card.clone());
    wait_for("the new display_name in the catalog", || async {
        entry(&g, "scripts").await["display_name"] == card["display_name"]
    })
    .await;
    assert_eq!(served_card(&g, "scripts").await.json(), card);
    assert_eq!(card_state(&g, "scripts").await, "fresh");
}

#[tokio::test]
async fn a_new_agent_id_replaces_the_old_one_as_a_route() {
    let (a, g) = single("scripts", refresh_all(REFRESH)).await;
    let old_id = a.agent_id();
    assert_eq!(served_card(&g, &old_id).await.status, 200);
    a.set_card(card_for("Sample Agent", None));
    let new_id = a.agent_id();
    assert_ne!(old_id, new_id);
    wait_for("the new agent_id in the catalog", || async {
        entry(&g, "scripts").await["agent_id"] == new_id.as_str()
    })
    .await;
    assert_eq!(served_card(&g, &new_id).await.status, 200);
    let r = served_card(&g, &old_id).await;
    assert_eq!(r.status, 404, "the old agent_id still routes: {r:?}");
    assert_eq!(r.error_code(), "UNKNOWN_AGENT");
}

#[tokio::test]
async fn an_unchanged_card_is_revalidated_with_if_none_match() {
    let (a, g) = single("scripts", refresh_all(REFRESH)).await;
    wait_for("two 304 answers to the gateway", || async {
        a.card_not_modified() >= 2
    })
    .await;
    let revalidations: Vec<_> = a
        .requests()
        .into_iter()
        .filter(|r| r.route == Route::Card && r.headers.contains_key("if-none-match"))
        .collect();
    assert!(revalidations.len() >= 2, "{revalidations:?}");
    assert_eq!(card_state(&g, "scripts").await, "fresh");
    assert_eq!(served_card(&g, "scripts").await.json(), a.card());
}

#[tokio::test]
async fn cache_control_max_age_drives_the_refresh_interval() {
    let a = agent().await;
    a.set_card_max_age(Some(1));
    // Without the agent's max-age the next fetch would be an hour away.
    let g = TestGateway::start(&[("scripts", &a)], refresh_all(Duration::from_secs(3600))).await;
    g.ready().await;
    let fetches = a.card_fetches();
    let mut card = a.card();
    card["display_name"] = json!("Picked Up Thanks To max-age");
    a.set_card(card.clone());
    wait_for("the changed card in the catalog", || async {
        entry(&g, "scripts").await["display_name"] == card["display_name"]
    })
    .await;
    assert!(a.card_fetches() > fetches);
}

// --- stale serving ---

#[tokio::test]
async fn a_failing_card_endpoint_keeps_the_last_good_card_serving() {
    let (a, g) = single("scripts", refresh_all(REFRESH)).await;
    let good = a.card();
    a.script(
        Route::Card,
        Reply::Json(
            500,
            json!({"error": {"code": "BOOM", "message": "card store down"}}),
        ),
    );
    wait_for_state(&g, "scripts", "stale").await;
    let e = entry(&g, "scripts").await;
    assert_eq!(e["display_name"], good["display_name"], "{e}");
    assert_eq!(e["agent_id"], good["agent_id"], "{e}");
    let r = served_card(&g, "scripts").await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json(), good);
    assert_eq!(r.header("x-a2a-card-state"), Some("stale"));
}

#[tokio::test]
async fn tasks_are_still_created_while_the_card_is_stale() {
    let (a, g) = single("scripts", refresh_all(REFRESH)).await;
    a.script(Route::Card, Reply::Json(500, json!({"error": "down"})));
    wait_for_state(&g, "scripts", "stale").await;
    let r = g.http.post_task("scripts").await;
    assert_eq!(r.status, 202, "{r:?}");
    assert_eq!(r.json()["status"], "SUBMITTED");
    // The input_schema of the stale card still guards the agent.
    let r = g
        .http
        .post_json(
            "/agents/scripts/tasks",
            &json!({"input": {"topic": "x", "filename": "not python"}}),
        )
        .await;
    assert_eq!(r.status, 422, "{r:?}");
    assert_eq!(r.error_code(), "INPUT_SCHEMA_VIOLATION");
}

#[tokio::test]
async fn a_stale_card_returns_to_fresh_when_the_agent_recovers() {
    let (a, g) = single("scripts", refresh_all(REFRESH)).await;
    a.script(Route::Card, Reply::Json(503, json!({"error": "later"})));
    wait_for_state(&g, "scripts", "stale").await;
    a.clear_scripts();
    wait_for_state(&g, "scripts", "fresh").await;
    let r = served_card(&g, "scripts").await;
    assert_eq!(r.header("x-a2a-card-state"), Some("fresh"));
    assert_eq!(r.json(), a.card());
}

#[tokio::test]
async fn an_invalid_new_card_keeps_the_last_good_card_serving() {
    let (a, g) = single("scripts", refresh_all(REFRESH)).await;
    let good = a.card();
    let mut bad = good.clone();
    bad["agent_id"] = json!("nope");
    bad["display_name"] = json!("Should Never Be Served");
    a.set_card(bad);
    wait_for_state(&g, "scripts", "stale").await;
    let e = entry(&g, "scripts").await;
    assert_eq!(e["display_name"], good["display_name"], "{e}");
    assert!(
        e["last_error"]
            .as_str()
            .is_some_and(|why| why.contains("agent_id")),
        "the catalog does not say why: {e}"
    );
    assert_eq!(served_card(&g, "scripts").await.json(), good);
}

/// A card whose agent_id is another agent's route name (in any case) would be hidden behind
/// that route (routes try names first): it is refused like an invalid card, the reason in the
/// catalog, and the last good card, if any, keeps serving. (`check-config` refuses UUID-shaped
/// route names; this gateway is started without that check, to reach the registry's own.)
#[tokio::test]
async fn a_card_whose_agent_id_is_another_agents_route_name_is_refused() {
    const ROUTE: &str = "0B5A4C43-64C5-4BD1-A2A8-1AD2A3C2E0F4";
    let clash = || {
        let mut card = card_for("Clashing Agent", None);
        card["agent_id"] = json!(ROUTE.to_ascii_lowercase());
        card
    };
    let (a, b) = (agent_serving(clash()).await, agent().await);
    let g = TestGateway::start(&[("first", &a), (ROUTE, &b)], refresh_all(REFRESH)).await;
    g.ready().await;
    let e = entry(&g, "first").await;
    assert_eq!(e["card_state"], "unavailable", "{e}");
    let says_why = |e: &Value| {
        e["last_error"]
            .as_str()
            .is_some_and(|why| why.contains("route name") && why.contains(ROUTE))
    };
    assert!(says_why(&e), "the catalog does not say why: {e}");
    let r = g.http.post_task("first").await;
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(r.error_code(), "AGENT_UNAVAILABLE");
    assert_eq!(card_state(&g, ROUTE).await, "fresh");
    // Fixed, then broken again: the last good card keeps serving, marked stale.
    let good = card_for("First Agent", None);
    a.set_card(good.clone());
    wait_for_state(&g, "first", "fresh").await;
    a.set_card(clash());
    wait_for_state(&g, "first", "stale").await;
    let e = entry(&g, "first").await;
    assert_eq!(e["agent_id"], good["agent_id"], "{e}");
    assert!(says_why(&e), "the catalog does not say why: {e}");
    assert_eq!(served_card(&g, "first").await.json(), good);
    // The refused card's agent_id never became a route.
    assert_eq!(
        served_card(&g, &ROUTE.to_ascii_lowercase())
            .await
            .error_code(),
        "UNKNOWN_AGENT"
    );
}

#[tokio::test]
async fn a_card_that_becomes_valid_again_is_fresh() {
    let (a, g) = single("scripts", refresh_all(REFRESH)).await;
    a.set_card(card_with("description", json!("short")));
    wait_for_state(&g, "scripts", "stale").await;
    let fixed = card_for("Fixed Agent", None);
    a.set_card(fixed.clone());
    wait_for_state(&g, "scripts", "fresh").await;
    let e = entry(&g, "scripts").await;
    assert_eq!(e["display_name"], "Fixed Agent", "{e}");
    assert!(e.get("last_error").is_none_or(Value::is_null), "{e}");
    assert_eq!(served_card(&g, "scripts").await.json(), fixed);
}

#[tokio::test]
async fn a_dead_agent_keeps_its_card_serving_stale() {
    let (a, g) = single("scripts", refresh_all(REFRESH)).await;
    let good = a.card();
    a.shutdown().await;
    wait_for_state(&g, "scripts", "stale").await;
    let r = served_card(&g, "scripts").await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json(), good);
    // The card is there, so the agent is not "unavailable": it is unreachable.
    let r = g.http.post_task("scripts").await;
    assert_eq!(r.status, 502, "{r:?}");
    assert_eq!(r.error_code(), "AGENT_UNREACHABLE");
}

// --- no good card: unavailable ---

/// Start a gateway in front of `agent`, wait for its first card attempt, and check that the agent
/// is unavailable, never contacted, with a `last_error` on `/agents` that mentions every one of
/// `reasons`; a create's 503 says only `kind`, the kind of failure (its text reaches every client
/// that may use the agent, and a card error can quote the agent's card or name its host).
async fn assert_unavailable(agent: &SampleAgent, reasons: &[&str], kind: &str) {
    let g = TestGateway::start(&[("broken", agent)], |_| {}).await;
    g.ready().await;
    let e = entry(&g, "broken").await;
    assert_eq!(e["card_state"], "unavailable", "{e}");
    assert!(e["agent_id"].is_null(), "{e}");
    let detail = e["last_error"].as_str().unwrap_or_default();
    for reason in reasons {
        assert!(
            detail.contains(reason),
            "last_error does not carry the reason ({reason}): {detail}"
        );
    }
    let r = g.http.post_task("broken").await;
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(r.error_code(), "AGENT_UNAVAILABLE");
    let message = r.json()["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        message,
        format!("agent \"broken\" has no valid card: {kind}"),
        "the 503 says the kind of failure, not the fetch's own text"
    );
    assert_eq!(creates_seen(agent), 0, "the agent was contacted");
    let r = served_card(&g, "broken").await;
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(r.error_code(), "AGENT_UNAVAILABLE");
}

fn creates_seen(agent: &SampleAgent) -> usize {
    agent.request_count(Route::CreateTask)
}

#[tokio::test]
async fn a_card_whose_agent_id_is_not_a_uuid_is_unavailable() {
    let a = agent_serving(card_with("agent_id", json!("nope"))).await;
    assert_unavailable(&a, &["/agent_id", "uuid"], "invalid card").await;
}

#[tokio::test]
async fn a_card_with_a_short_description_is_unavailable() {
    let a = agent_serving(card_with("description", json!("too short"))).await;
    assert_unavailable(&a, &["/description"], "invalid card").await;
}

#[tokio::test]
async fn a_card_with_a_bad_notification_endpoint_is_unavailable() {
    let mut card = card_for("Hooked Agent", None);
    card["notification_config"] = json!({"endpoint_url": "not a uri"});
    let a = agent_serving(card).await;
    assert_unavailable(
        &a,
        &["/notification_config/endpoint_url", "uri"],
        "invalid card",
    )
    .await;
}

#[tokio::test]
async fn a_card_whose_input_schema_has_a_remote_ref_is_unavailable() {
    let a = agent_serving(card_with(
        "input_schema",
        json!({"$ref": "http://169.254.169.254/latest/meta-data"}),
    ))
    .await;
    assert_unavailable(&a, &["input_schema"], "invalid card").await;
}

#[tokio::test]
async fn a_card_whose_input_schema_has_a_file_ref_is_unavailable() {
    let a = agent_serving(card_with(
        "input_schema",
        json!({"$ref": "file:///etc/passwd"}),
    ))
    .await;
    assert_unavailable(&a, &["input_schema"], "invalid card").await;
}

#[tokio::test]
async fn a_remote_ref_in_a_card_is_never_fetched() {
    let canary = agent().await;
    let schema_url = format!("{}/schemas/input.json", canary.base_url());
    let mut card = card_with("input_schema", json!({"$ref": schema_url}));
    card["output_schema"] = json!({"$ref": format!("{}/schemas/output.json", canary.base_url())});
    let a = agent_serving(card).await;
    let g = TestGateway::start(&[("broken", &a)], |_| {}).await;
    g.ready().await;
    assert_eq!(card_state(&g, "broken").await, "unavailable");
    assert_eq!(g.http.post_task("broken").await.status, 503);
    assert_eq!(
        canary.request_count(Route::Other),
        0,
        "the gateway fetched a $ref the card pointed at: {:?}",
        canary.requests()
    );
}

#[tokio::test]
async fn a_card_that_is_not_json_is_unavailable() {
    let a = agent().await;
    a.script(
        Route::Card,
        Reply::Raw {
            status: 200,
            content_type: "application/json".into(),
            body: bytes::Bytes::from_static(b"<html>not a card</html>"),
        },
    );
    assert_unavailable(&a, &["not JSON"], "invalid card").await;
}

#[tokio::test]
async fn an_oversized_card_is_unavailable() {
    let a = agent().await;
    let mut card = a.card();
    card["description"] = json!("x".repeat(2 << 20));
    a.set_card(card);
    assert_unavailable(&a, &["larger than"], "card too large").await;
}

#[tokio::test]
async fn a_card_answered_with_an_http_error_is_unavailable() {
    let a = agent().await;
    a.script(
        Route::Card,
        Reply::Json(404, json!({"error": "no card here"})),
    );
    assert_unavailable(&a, &["404"], "card fetch answered 404 Not Found").await;
}

#[tokio::test]
async fn readyz_is_ok_once_attempted_and_lists_agents_without_a_card() {
    let good = agent().await;
    let bad = agent_serving(card_with("agent_id", json!("nope"))).await;
    let g = TestGateway::start(&[("good", &good), ("bad", &bad)], |_| {}).await;
    g.ready().await;
    let r = g.http.get("/readyz").await;
    assert_eq!(r.status, 200, "{r:?}");
    let without: Vec<Value> = r.json()["agents_without_card"]
        .as_array()
        .cloned()
        .expect("agents_without_card");
    assert_eq!(without.len(), 1, "{without:?}");
    assert_eq!(without[0]["agent"], "bad");
    assert!(
        without[0]["reason"]
            .as_str()
            .is_some_and(|why| why.contains("agent_id")),
        "{without:?}"
    );
}

// --- a slow agent holds up only itself ---

#[tokio::test]
async fn a_hanging_card_fetch_holds_up_neither_the_listener_nor_other_agents() {
    let (slow, fast) = (agent().await, agent().await);
    slow.script(Route::Card, Reply::Hang);
    let agents = [("slow", &slow), ("fast", &fast)];
    let start = TestGateway::start(&agents, |cfg| {
        for a in &mut cfg.agents {
            a.timeout = Duration::from_secs(120);
        }
    });
    let g = tokio::time::timeout(Duration::from_secs(10), start)
        .await
        .expect("the gateway starts without waiting for the slow card");
    assert_eq!(g.http.get("/healthz").await.status, 200);
    wait_for_state(&g, "fast", "fresh").await;
    let r = g.http.post_task("fast").await;
    assert_eq!(r.status, 202, "{r:?}");
    let r = g.http.post_task("slow").await;
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(r.error_code(), "AGENT_UNAVAILABLE");
    // All of the above happened while the slow card was still being fetched.
    assert_eq!(slow.card_fetches(), 1);
    let r = g.http.get("/readyz").await;
    assert_eq!(
        r.status, 503,
        "not every agent has had a card attempt: {r:?}"
    );
    assert_eq!(r.json()["awaiting_first_card_attempt"], json!(["slow"]));
    assert_eq!(card_state(&g, "slow").await, "unavailable");
}

#[tokio::test]
async fn a_slow_card_is_served_once_it_arrives() {
    let (slow, fast) = (agent().await, agent().await);
    slow.script(
        Route::Card,
        Reply::Delay(Duration::from_secs(3), Box::new(Reply::Default)),
    );
    let g = TestGateway::start(&[("slow", &slow), ("fast", &fast)], |cfg| {
        for a in &mut cfg.agents {
            a.timeout = Duration::from_secs(30);
        }
    })
    .await;
    wait_for_state(&g, "fast", "fresh").await;
    assert_eq!(g.http.post_task("fast").await.status, 202);
    g.ready().await;
    assert_eq!(card_state(&g, "slow").await, "fresh");
    assert_eq!(served_card(&g, "slow").await.json(), slow.card());
    assert_eq!(g.http.post_task("slow").await.status, 202);
}

// --- auth_header never leaves the gateway ---

#[tokio::test]
async fn the_auth_header_is_not_in_the_served_card() {
    let a = agent_serving(card_for("Hooked Agent", Some((HOOK, SECRET)))).await;
    let g = TestGateway::start(&[("hooked", &a)], |_| {}).await;
    g.ready().await;
    for route in ["hooked".to_owned(), a.agent_id()] {
        let r = served_card(&g, &route).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert!(!contains(&r.body, SECRET_TOKEN), "secret served: {r:?}");
        let card = r.json();
        assert!(
            card["notification_config"].get("auth_header").is_none(),
            "{card}"
        );
        assert_eq!(card["notification_config"]["endpoint_url"], HOOK);
        assert_eq!(card["display_name"], "Hooked Agent");
    }
}

#[tokio::test]
async fn the_auth_header_is_not_in_the_catalog_readyz_or_metrics() {
    let a = agent_serving(card_for("Hooked Agent", Some((HOOK, SECRET)))).await;
    let g = TestGateway::start(&[("hooked", &a)], refresh_all(REFRESH)).await;
    g.ready().await;
    assert_eq!(g.http.post_task("hooked").await.status, 202);
    // A stale period puts an error next to the card in every report.
    a.script(Route::Card, Reply::Json(500, json!({"error": "down"})));
    wait_for_state(&g, "hooked", "stale").await;
    for path in [
        "/agents",
        "/readyz",
        "/metrics",
        "/agents/hooked/agent-card.json",
    ] {
        let r = g.http.get(path).await;
        assert!(!contains(&r.body, SECRET_TOKEN), "secret in {path}: {r:?}");
        for (k, v) in &r.headers {
            assert!(
                !contains(v.as_bytes(), SECRET_TOKEN),
                "secret in {path} header {k}"
            );
        }
    }
}

#[tokio::test]
async fn the_auth_header_of_an_invalid_card_is_not_in_error_reports() {
    for notification_config in [
        json!({"endpoint_url": "not a uri", "auth_header": SECRET}),
        json!({"endpoint_url": HOOK, "auth_header": [SECRET]}),
        json!({"endpoint_url": HOOK, "auth_header": {"header": SECRET}}),
    ] {
        let mut card = card_for("Hooked Agent", None);
        card["notification_config"] = notification_config.clone();
        let a = agent_serving(card).await;
        let g = TestGateway::start(&[("hooked", &a)], |_| {}).await;
        g.ready().await;
        assert_eq!(card_state(&g, "hooked").await, "unavailable");
        let task = g.http.post_task("hooked").await;
        assert_eq!(task.status, 503, "{task:?}");
        for r in [
            task,
            served_card(&g, "hooked").await,
            g.http.get("/agents").await,
            g.http.get("/readyz").await,
        ] {
            assert!(
                !contains(&r.body, SECRET_TOKEN),
                "secret of {notification_config} leaked: {r:?}"
            );
        }
    }
}

// --- metrics ---

async fn fetches(g: &TestGateway, agent: &str, result: &str) -> f64 {
    g.metric(
        "a2a_gateway_card_fetches_total",
        &[("agent", agent), ("result", result)],
    )
    .await
}

#[tokio::test]
async fn card_fetches_are_counted_ok_and_not_modified() {
    let (a, g) = single("scripts", refresh_all(REFRESH)).await;
    assert!(fetches(&g, "scripts", "ok").await >= 1.0);
    wait_for("a revalidation", || async { a.card_not_modified() >= 1 }).await;
    wait_for("not_modified counted", || async {
        fetches(&g, "scripts", "not_modified").await >= 1.0
    })
    .await;
    let ok = fetches(&g, "scripts", "ok").await;
    a.set_card(card_for("New Card", None));
    wait_for("a second ok counted", || async {
        fetches(&g, "scripts", "ok").await > ok
    })
    .await;
    assert_eq!(fetches(&g, "scripts", "http_error").await, 0.0);
    assert_eq!(fetches(&g, "scripts", "invalid").await, 0.0);
}

#[tokio::test]
async fn an_oversized_card_is_counted_as_invalid() {
    let a = agent().await;
    let mut card = a.card();
    card["description"] = json!("x".repeat(2 << 20));
    a.set_card(card);
    let g = TestGateway::start(&[("big", &a)], |_| {}).await;
    g.ready().await;
    assert!(fetches(&g, "big", "invalid").await >= 1.0);
    assert_eq!(fetches(&g, "big", "unreachable").await, 0.0);
}

#[tokio::test]
async fn card_fetch_timeouts_are_counted_and_reported() {
    let a = agent().await;
    a.script(
        Route::Card,
        Reply::Delay(Duration::from_secs(30), Box::new(Reply::Default)),
    );
    let g = TestGateway::start(&[("slow", &a)], |cfg| {
        cfg.agents[0].timeout = Duration::from_millis(200);
    })
    .await;
    g.ready().await;
    assert!(fetches(&g, "slow", "timeout").await >= 1.0);
    let e = entry(&g, "slow").await;
    assert_eq!(e["card_state"], "unavailable", "{e}");
    assert!(
        e["last_error"]
            .as_str()
            .is_some_and(|why| why.contains("timed out")),
        "{e}"
    );
}

#[tokio::test]
async fn card_fetches_of_a_dead_agent_are_counted_unreachable() {
    let (a, g) = single("scripts", refresh_all(REFRESH)).await;
    a.shutdown().await;
    wait_for("unreachable counted", || async {
        fetches(&g, "scripts", "unreachable").await >= 1.0
    })
    .await;
    assert_eq!(card_state(&g, "scripts").await, "stale");
}

#[tokio::test]
async fn card_fetches_are_counted_http_error_and_invalid() {
    let a = agent().await;
    let other = agent().await;
    let g = TestGateway::start(&[("scripts", &a), ("other", &other)], refresh_all(REFRESH)).await;
    g.ready().await;
    a.script(Route::Card, Reply::Json(500, json!({"error": "down"})));
    wait_for("http_error counted", || async {
        fetches(&g, "scripts", "http_error").await >= 1.0
    })
    .await;
    a.script(
        Route::Card,
        Reply::Json(200, card_with("agent_id", json!("nope"))),
    );
    wait_for("invalid counted", || async {
        fetches(&g, "scripts", "invalid").await >= 1.0
    })
    .await;
    // Counted per agent: the healthy one has neither.
    assert_eq!(fetches(&g, "other", "http_error").await, 0.0);
    assert_eq!(fetches(&g, "other", "invalid").await, 0.0);
    assert!(fetches(&g, "other", "ok").await >= 1.0);
}
