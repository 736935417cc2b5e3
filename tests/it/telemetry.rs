//! OpenTelemetry: one trace from the orchestrator through the gateway to the agent and on to the
//! webhook subscriber, as a real OTLP/HTTP collector on loopback receives it (decoded with
//! opentelemetry-proto), on the in-process store and on Redis; an agent's push continuing its own
//! trace; sampling.

use std::time::Duration;

use a2a_gateway::config::{Config, LogFormat, RedisConfig, SubscriberConfig, TelemetryConfig};
use hyper::Method;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use serde_json::json;

use crate::support::collector::{Collector, Got};
use crate::support::hook::Hook;
use crate::support::redis_server::RedisServer;
use crate::support::*;

const ORCHESTRATOR_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const ORCHESTRATOR_SPAN: &str = "00f067aa0ba902b7";

fn traced(cfg: &mut Config, collector: &Collector, hook: &Hook, ratio: f64) {
    ingest(cfg);
    cfg.telemetry = TelemetryConfig {
        otlp_endpoint: Some(collector.endpoint()),
        service_name: "gw-under-test".into(),
        sample_ratio: ratio,
    };
    cfg.subscribers = vec![SubscriberConfig::new("orchestrator", &hook.url())];
    cfg.webhooks.allow = vec!["127.0.0.1/32".into()];
}

/// Create a task on agent `a` with these trace headers, asserting 202.
async fn create_traced(g: &TestGateway, trace: &[(&str, &str)]) -> Resp {
    let mut headers = vec![("content-type", "application/json")];
    headers.extend_from_slice(trace);
    let res = g
        .http
        .send(
            Method::POST,
            "/agents/a/tasks",
            &headers,
            json!({ "input": good_input() }).to_string(),
        )
        .await;
    assert_eq!(res.status, 202, "{}", String::from_utf8_lossy(&res.body));
    res
}

/// The child of `parent` named `name`.
fn child_of<'a>(spans: &'a [Got], parent: &Got, name: &str) -> &'a Got {
    spans
        .iter()
        .find(|s| s.name == name && s.parent_id == parent.span_id)
        .unwrap_or_else(|| panic!("no {name:?} child of {:?} in {spans:#?}", parent.name))
}

async fn orchestrator_to_agent_to_webhook(redis: Option<RedisConfig>) {
    let collector = Collector::start().await;
    let hook = Hook::start().await;
    let a = agent().await;
    let g = TestGateway::start(&[("a", &a)], |cfg| {
        traced(cfg, &collector, &hook, 1.0);
        cfg.redis = redis;
    })
    .await;
    g.ready().await;

    // The orchestrator's own trace, with a vendor's tracestate to be carried along.
    let parent = format!("00-{ORCHESTRATOR_TRACE}-{ORCHESTRATOR_SPAN}-01");
    let res = create_traced(&g, &[("traceparent", &parent), ("tracestate", "orch=7")]).await;
    let task_id = res.json()["task_id"].as_str().expect("task_id").to_owned();

    // The gateway's request span continues the orchestrator's span.
    let root = collector
        .wait_span(ORCHESTRATOR_TRACE, "POST /agents/{name}/tasks")
        .await;
    let delivery = collector
        .wait_span(ORCHESTRATOR_TRACE, "webhook delivery")
        .await;
    assert_eq!(root.parent_id, ORCHESTRATOR_SPAN);
    assert_eq!(root.kind, SpanKind::Server);
    assert_eq!(root.service, "gw-under-test");
    root.assert_attrs(&[
        ("http.request.method", "POST"),
        ("http.response.status_code", "202"),
        ("url.path", "/agents/a/tasks"),
        ("http.route", "/agents/{name}/tasks"),
        ("a2a.route", "create_task"),
        ("a2a.agent", "a"),
        ("a2a.client", "anonymous"),
    ]);
    assert_eq!(root.attr("a2a.task.id").as_deref(), Some(task_id.as_str()));
    assert!(!root.failed);

    let spans = collector.spans();
    let validate = child_of(&spans, &root, "validate input");
    let exchange = child_of(&spans, &root, "agent exchange");
    let apply = child_of(&spans, &root, "ledger apply");
    assert_eq!(validate.kind, SpanKind::Internal);
    assert_eq!(exchange.kind, SpanKind::Client);
    assert_eq!(
        exchange.attr("http.response.status_code").as_deref(),
        Some("202")
    );
    assert_eq!(exchange.attr("url.path").as_deref(), Some("/tasks"));
    assert_eq!(apply.attr("a2a.ledger.verdict").as_deref(), Some("new"));
    assert_eq!(apply.attr("a2a.task.id").as_deref(), Some(task_id.as_str()));

    // The agent was asked with the exchange span as its parent, the tracestate carried along.
    let asked = a
        .requests()
        .into_iter()
        .find(|r| r.method == "POST" && r.path == "/tasks")
        .expect("the agent got the create");
    let header = |name: &str| {
        asked
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    assert_eq!(header("traceparent"), Some(exchange.traceparent()));
    assert_eq!(header("tracestate").as_deref(), Some("orch=7"));

    // The delivery of the change the apply recorded (queued, then sent by the worker): its
    // span is the apply's child, and the subscriber got it as its parent.
    assert_eq!(delivery.parent_id, apply.span_id);
    assert_eq!(delivery.kind, SpanKind::Client);
    delivery.assert_attrs(&[
        ("a2a.webhook.subscriber", "orchestrator"),
        ("a2a.webhook.attempt", "1"),
        ("http.response.status_code", "200"),
    ]);
    wait_for("the delivery", || async { hook.count() >= 1 }).await;
    let got = &hook.received()[0];
    assert_eq!(
        got.header("traceparent"),
        Some(delivery.traceparent().as_str())
    );
    assert_eq!(got.header("tracestate"), Some("orch=7"));
    assert_eq!(got.json()["data"]["task_id"], task_id.as_str());
    assert!(collector.bad().is_empty(), "{:?}", collector.bad());
    // Every span the collector got is counted as exported, none as failed or dropped.
    let received = collector.spans().len() as f64;
    let exported = g
        .metric(
            "a2a_gateway_telemetry_spans_total",
            &[("outcome", "exported")],
        )
        .await;
    assert!(
        exported >= received && received >= 5.0,
        "{exported} counted, {received} received"
    );
    for outcome in ["failed", "dropped"] {
        let n = g
            .metric("a2a_gateway_telemetry_spans_total", &[("outcome", outcome)])
            .await;
        assert_eq!(n, 0.0, "{outcome}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_runs_from_orchestrator_to_agent_to_webhook() {
    orchestrator_to_agent_to_webhook(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trace_context_is_queued_with_the_delivery_in_redis() {
    let r = RedisServer::start();
    orchestrator_to_agent_to_webhook(Some(r.config("otel:"))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_push_continues_the_agents_trace_to_the_webhook() {
    let collector = Collector::start().await;
    let hook = Hook::start().await;
    let a = agent().await;
    let g = TestGateway::start(&[("a", &a)], |cfg| traced(cfg, &collector, &hook, 1.0)).await;
    g.ready().await;
    let id = a.create_task(good_input());
    let task = moved(&a, &id, "WORKING");
    let agent_trace = "0af7651916cd43dd8448eb211c80319c";
    let res = g
        .http
        .send(
            Method::POST,
            "/agents/a/notifications",
            &[
                ("content-type", "application/json"),
                ("authorization", &format!("Bearer {TOKEN}")),
                (
                    "traceparent",
                    &format!("00-{agent_trace}-b7ad6b7169203331-01"),
                ),
            ],
            notification(&task).to_string(),
        )
        .await;
    assert!(
        res.status < 300,
        "{} {}",
        res.status,
        String::from_utf8_lossy(&res.body)
    );
    let root = collector
        .wait_span(agent_trace, "POST /agents/{name}/notifications")
        .await;
    let delivery = collector.wait_span(agent_trace, "webhook delivery").await;
    assert_eq!(root.parent_id, "b7ad6b7169203331");
    let spans = collector.spans();
    let apply = child_of(&spans, &root, "ledger apply");
    assert_eq!(delivery.parent_id, apply.span_id);
    wait_for("the delivery", || async { hook.count() >= 1 }).await;
    assert_eq!(
        hook.received()[0].header("traceparent"),
        Some(delivery.traceparent().as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsampled_traces_are_propagated_but_not_exported() {
    let collector = Collector::start().await;
    let hook = Hook::start().await;
    let a = agent().await;
    // Ratio 0: no trace started here is recorded; a caller's sampled flag still rules its own.
    let g = TestGateway::start(&[("a", &a)], |cfg| traced(cfg, &collector, &hook, 0.0)).await;
    g.ready().await;
    let unsampled = "11111111111111111111111111111111";
    create_traced(&g, &[]).await;
    let parent = format!("00-{unsampled}-2222222222222222-00");
    create_traced(&g, &[("traceparent", &parent)]).await;
    // A sampled caller is recorded whatever the ratio.
    let sampled = "33333333333333333333333333333333";
    let parent = format!("00-{sampled}-4444444444444444-01");
    create_traced(&g, &[("traceparent", &parent)]).await;
    collector.wait_span(sampled, "webhook delivery").await;
    // Every create's agent request carried a traceparent; the unsampled ones say so (flags
    // 00), the caller's trace id kept.
    let sent: Vec<String> = a
        .requests()
        .into_iter()
        .filter(|r| r.path == "/tasks")
        .filter_map(|r| Some(r.headers.get("traceparent")?.to_str().ok()?.to_owned()))
        .collect();
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert!(sent[0].ends_with("-00"), "{sent:?}");
    assert!(sent[1].starts_with(&format!("00-{unsampled}-")) && sent[1].ends_with("-00"));
    assert!(sent[2].starts_with(&format!("00-{sampled}-")) && sent[2].ends_with("-01"));
    // Give a stray export time to arrive: only the sampled trace was exported.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let traces: std::collections::HashSet<String> =
        collector.spans().into_iter().map(|s| s.trace_id).collect();
    assert_eq!(traces.len(), 1, "{traces:?}");
    assert!(traces.contains(sampled));
}

#[tokio::test]
async fn telemetry_keys_are_checked() {
    let problems = Config::parse(
        r#"
        listen = "127.0.0.1:0"
        log_format = "xml"
        [[agents]]
        name = "a"
        url = "http://127.0.0.1:9000"
        [telemetry]
        otlp_endpoint = "grpc://collector:4317"
        service_name = ""
        sample_ratio = 1.5
    "#,
    )
    .expect_err("broken");
    let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
    for key in [
        "log_format",
        "telemetry.otlp_endpoint",
        "telemetry.service_name",
        "telemetry.sample_ratio",
    ] {
        assert!(keys.contains(&key), "{key} not reported: {problems:?}");
    }
}

#[tokio::test]
async fn telemetry_and_the_log_format_need_a_restart_the_access_log_does_not() {
    let (_a, g) = single("a", |_| {}).await;
    let mut next = (*g.gw.config()).clone();
    next.telemetry.otlp_endpoint = Some("http://127.0.0.1:4318".into());
    next.log_format = LogFormat::Json;
    next.access_log = true;
    let r = g.gw.reload(next).await.expect("reload applied");
    assert_eq!(r.need_restart, ["telemetry", "log_format"], "{r:?}");
    let now = g.gw.config();
    assert_eq!(now.telemetry.otlp_endpoint, None);
    assert_eq!(now.log_format, LogFormat::Text);
    assert!(now.access_log);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_a_collector_misses_are_counted_as_failed_and_requests_go_on() {
    let (_a, g) = single("a", |cfg| {
        cfg.telemetry.otlp_endpoint = Some("http://127.0.0.1:9".into());
    })
    .await;
    // Nothing listens on port 9: every export fails, and no request waits for one.
    for _ in 0..3 {
        g.create_task("a").await;
    }
    wait_for("failed exports counted", || async {
        g.metric(
            "a2a_gateway_telemetry_spans_total",
            &[("outcome", "failed")],
        )
        .await
            >= 12.0
    })
    .await;
    assert_eq!(
        g.metric(
            "a2a_gateway_telemetry_spans_total",
            &[("outcome", "exported")]
        )
        .await,
        0.0
    );
}
