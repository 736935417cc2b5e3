//! The A2A alerts of deploy/prometheus/alerts.yml (`A2AGatewayA2AGatewayErrors`,
//! `A2AGatewayA2AAgentTimeouts`, `A2AGatewayA2AAgentBusy`, `A2AGatewayA2AAgentErrors`) against
//! what the gateway answers and exports, so that rule and gateway cannot drift apart:
//!
//! - every reason the gateway can answer an A2A call with (its codes as the A2A errors they
//!   become, the protocol's errors, its stream endings, `agent_error`) is matched by the
//!   outcome selector of the rule of the party at fault, and by no other rule; the client's own
//!   mistakes by none;
//! - a real gateway in front of scripted A2A agents — one stopped, one slower than its
//!   `timeout_ms`, one at its `max_in_flight`, one answering errors of its own, one healthy —
//!   called over JSON-RPC (HTTP 200 every time) by a configured client: the series it exports
//!   carry the outcome and the `client`, each outcome is matched by the rule of its agent's
//!   failure, and promtool, fed those very series, fires exactly those four alerts, none for
//!   the healthy agent's TASK_NOT_FOUND and INVALID_PARAMS.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use serde_json::{json, Value};

use a2a_gateway::http::a2a::frame::from_api;
use a2a_gateway::http::error::{ApiError, Code};
use a2a_gateway::protocol::a2a::error::gateway_grpc;
use a2a_gateway::protocol::a2a::ErrorKind;
use a2a_gateway::stream::framing;

use crate::a2a_gateway::{a2a_agent, gateway};
use crate::monitoring::{alert_exprs, repo_file, sample_labels, selectors};
use crate::support::a2a_calls::{error_code, message, reason, rest, rpc, two_clients, ALICE, OPS};
use crate::support::a2a_script::{task, Answer, ScriptedAgent};
use crate::support::{metric_value, wait_for, Http};

const FAMILY: &str = "a2a_gateway_a2a_requests_total";

/// Who an A2A failure is the fault of, and so which rule sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Party {
    /// The gateway (or what it stands on: the agent's reachability, the store, the ledger).
    Gateway,
    /// The agent did not answer within `timeout_ms`.
    Timeout,
    /// The agent's `max_in_flight` was reached.
    Busy,
    /// The agent answered an error of its own, or an answer that breaks A2A.
    Agent,
    /// The client's own mistake, or no failure: no rule.
    Client,
}

impl Party {
    fn rule(self) -> Option<&'static str> {
        match self {
            Party::Gateway => Some("A2AGatewayA2AGatewayErrors"),
            Party::Timeout => Some("A2AGatewayA2AAgentTimeouts"),
            Party::Busy => Some("A2AGatewayA2AAgentBusy"),
            Party::Agent => Some("A2AGatewayA2AAgentErrors"),
            Party::Client => None,
        }
    }
}

/// The outcome values each A2A rule's numerator selects on `a2a_gateway_a2a_requests_total`,
/// read from deploy/prometheus/alerts.yml: (rule, outcomes). A selector is required to be a
/// plain alternation of literal values (`outcome=~"A|B"`, or `outcome="A"`), whose match under
/// Prometheus's fully anchored regexes is membership in the list.
fn rule_outcomes() -> Vec<(String, Vec<String>)> {
    let yaml = repo_file("deploy/prometheus/alerts.yml");
    let mut out = Vec::new();
    for (name, expr) in alert_exprs(&yaml) {
        if !name.starts_with("A2AGatewayA2A") {
            continue;
        }
        let outcomes: Vec<Vec<String>> = selectors(&expr)
            .into_iter()
            .filter(|(n, _)| n == FAMILY)
            .flat_map(|(_, ms)| ms)
            .filter(|(label, _, _)| label == "outcome")
            .map(|(_, op, value)| {
                assert!(op == "=~" || op == "=", "{name}: outcome{op}{value:?}");
                assert!(
                    value
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'|'),
                    "{name}: outcome{op}{value:?} is not a list of literal values"
                );
                value.split('|').map(str::to_owned).collect()
            })
            .collect();
        assert_eq!(
            outcomes.len(),
            1,
            "{name}: one outcome selector (the numerator's): {expr}"
        );
        out.extend(outcomes.into_iter().map(|o| (name.clone(), o)));
    }
    let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
    for party in [Party::Gateway, Party::Timeout, Party::Busy, Party::Agent] {
        let rule = party.rule().unwrap_or_default();
        assert!(names.contains(&rule), "{rule} in alerts.yml: {names:?}");
    }
    out
}

/// The rules whose outcome selector matches `outcome`.
fn matched_by<'a>(rules: &'a [(String, Vec<String>)], outcome: &str) -> Vec<&'a str> {
    rules
        .iter()
        .filter(|(_, outcomes)| outcomes.iter().any(|o| o == outcome))
        .map(|(name, _)| name.as_str())
        .collect()
}

/// Every outcome the gateway can count on an A2A call, with the party at fault, derived from
/// the gateway's own tables rather than listed by hand where they allow it.
fn every_outcome() -> Vec<(String, Party)> {
    let mut out: Vec<(String, Party)> = Vec::new();
    // The gateway's codes, as the A2A errors they become (TASK_NOT_FOUND the protocol's,
    // AGENT_PROTOCOL_VIOLATION InvalidAgentResponse, INVALID_JSON JSON_PARSE, the rest in the
    // gateway's domain). 5xx is the gateway's, or what it stands on; 4xx the client's.
    for code in Code::ALL {
        let failure = from_api(ApiError::new(code, "a test"));
        let reason = failure.error.kind.reason().to_owned();
        let party = match reason.as_str() {
            "AGENT_TIMEOUT" => Party::Timeout,
            "AGENT_BUSY" => Party::Busy,
            "INVALID_AGENT_RESPONSE" => Party::Agent,
            _ if code.status().is_server_error() => Party::Gateway,
            _ => Party::Client,
        };
        out.push((reason, party));
    }
    // The protocol's errors: the 500s (INTERNAL_ERROR, INVALID_AGENT_RESPONSE) come from the
    // agent; the rest are about the client's request, whoever found them.
    for code in (-32009..=-32001).chain(-32603..=-32600).chain([-32700]) {
        let kind = ErrorKind::from_code(code).unwrap_or_else(|| panic!("a kind for {code}"));
        let party = if kind.http_status() >= 500 {
            Party::Agent
        } else {
            Party::Client
        };
        out.push((kind.reason().to_owned(), party));
    }
    // Reasons of the gateway's own that are no `Code`: its stream endings, the reasons of its
    // gRPC table, and INTERNAL (an answer it could not read back: http/a2a/frame.rs).
    for reason in [
        framing::DRAINING,
        framing::UPSTREAM_ERROR,
        framing::SLOW_CONSUMER,
        framing::ACCESS_REVOKED,
        "REPLICA_UNAVAILABLE",
        "AUTH_UNAVAILABLE",
    ] {
        let party = match gateway_grpc(reason) {
            Some("UNAVAILABLE") => Party::Gateway,
            Some(_) => Party::Client,
            None => panic!("{reason} is in the gateway's gRPC table"),
        };
        out.push((reason.to_owned(), party));
    }
    out.push(("INTERNAL".to_owned(), Party::Gateway));
    // An agent's error of no kind the protocol or the gateway defines (its reason is the
    // agent's to choose, so never a label), and success.
    out.push(("agent_error".to_owned(), Party::Agent));
    out.push(("ok".to_owned(), Party::Client));
    // Both tables agree: a reason whose gRPC code is UNAVAILABLE is a failure of the gateway's,
    // but AGENT_BUSY (its own rule); DEADLINE_EXCEEDED is the timeout's.
    for (reason, party) in &out {
        match gateway_grpc(reason) {
            Some("UNAVAILABLE") if reason != "AGENT_BUSY" => {
                assert_eq!(*party, Party::Gateway, "{reason}")
            }
            Some("DEADLINE_EXCEEDED") => assert_eq!(*party, Party::Timeout, "{reason}"),
            _ => {}
        }
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn every_reason_the_gateway_answers_is_in_the_rule_of_the_party_at_fault() {
    let rules = rule_outcomes();
    let outcomes = every_outcome();
    assert!(outcomes.len() > 40, "{outcomes:?}");
    let mut wrong = Vec::new();
    for (outcome, party) in &outcomes {
        let want: Vec<&str> = party.rule().into_iter().collect();
        let got = matched_by(&rules, outcome);
        if got != want {
            wrong.push(format!(
                "{outcome} ({party:?}): wanted {want:?}, matched by {got:?}"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "outcomes matched by the wrong A2A rules:\n  {}",
        wrong.join("\n  ")
    );
    // Nothing in a selector that the gateway never answers (a misspelt reason matches nothing).
    for (rule, listed) in &rules {
        for o in listed {
            let party = outcomes.iter().find(|(x, _)| x == o).map(|(_, p)| *p);
            assert!(
                party.and_then(Party::rule) == Some(rule.as_str()),
                "{rule} selects {o:?}, which the gateway answers as {party:?}"
            );
        }
    }
    // The dashboard's failure ratio panel charts the very sets the rules alert on.
    let dashboard: Value =
        serde_json::from_str(&repo_file("deploy/grafana/a2a-gateway.json")).expect("JSON");
    let panel = dashboard["panels"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["title"] == "A2A failure ratio by agent")
        .expect("the dashboard's A2A failure ratio panel");
    let mut charted: Vec<Vec<String>> = Vec::new();
    for t in panel["targets"].as_array().into_iter().flatten() {
        let expr = t["expr"].as_str().expect("an expr");
        for (_, matchers) in selectors(expr).into_iter().filter(|(n, _)| n == FAMILY) {
            charted.extend(
                matchers
                    .into_iter()
                    .filter(|(l, op, _)| l == "outcome" && op == "=~")
                    .map(|(_, _, v)| v.split('|').map(str::to_owned).collect()),
            );
        }
    }
    let mut alerted: Vec<Vec<String>> = rules.iter().map(|(_, o)| o.clone()).collect();
    charted.sort();
    alerted.sort();
    assert_eq!(charted, alerted, "the panel's outcome sets are the rules'");
    // The cases the alerts are for, spelt out.
    for (outcome, rule) in [
        ("AGENT_UNREACHABLE", Some("A2AGatewayA2AGatewayErrors")),
        ("AGENT_UNAVAILABLE", Some("A2AGatewayA2AGatewayErrors")),
        ("STORE_UNAVAILABLE", Some("A2AGatewayA2AGatewayErrors")),
        ("LEDGER_FULL", Some("A2AGatewayA2AGatewayErrors")),
        ("AGENT_TIMEOUT", Some("A2AGatewayA2AAgentTimeouts")),
        ("AGENT_BUSY", Some("A2AGatewayA2AAgentBusy")),
        ("agent_error", Some("A2AGatewayA2AAgentErrors")),
        ("INTERNAL_ERROR", Some("A2AGatewayA2AAgentErrors")),
        ("INVALID_AGENT_RESPONSE", Some("A2AGatewayA2AAgentErrors")),
        ("TASK_NOT_FOUND", None),
        ("INVALID_PARAMS", None),
        ("UNAUTHORIZED", None),
        ("FORBIDDEN", None),
        ("RATE_LIMITED", None),
        ("TOO_MANY_TASKS", None),
        ("ok", None),
    ] {
        assert_eq!(
            matched_by(&rules, outcome),
            rule.into_iter().collect::<Vec<_>>(),
            "{outcome}"
        );
    }
}

/// A JSON-RPC error body as an agent sends it (the id it could not echo: null).
fn agent_error(code: i64, reason: &str, domain: &str) -> Answer {
    Answer::Raw(
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": "it went wrong",
            "data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": domain}]}})
        .to_string()
        .into_bytes(),
    )
}

/// Each `a2a_gateway_a2a_requests_total` sample of the exposition: its labels and value.
fn samples(text: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    text.lines()
        .filter_map(|l| l.strip_prefix(FAMILY)?.strip_prefix('{'))
        .map(|rest| {
            let (inner, value) = rest.rsplit_once("} ").expect("labels and a value");
            let labels = sample_labels(inner).into_iter().collect();
            (labels, value.trim().parse().expect("a number"))
        })
        .collect()
}

/// promtool, on the shipped rules, fed `series` (label sets as exported, each growing by its
/// value every minute for 20 minutes, from replica `gw-1:8080`): the A2A alerts firing at 15
/// minutes, by (alertname, agent), are exactly `want`.
fn alerts_fire_on(series: &[(BTreeMap<String, String>, f64)], want: &[(&str, &str)]) {
    let rules =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus/alerts.yml");
    let mut input = String::new();
    for (labels, v) in series {
        let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
        input.push_str(&format!(
            "      - series: '{FAMILY}{{job=\"a2a-gateway\",instance=\"gw-1:8080\",{}}}'\n        values: '0+{v}x20'\n",
            labels.join(",")
        ));
    }
    let mut expected = String::new();
    for (alert, agent) in want {
        expected.push_str(&format!(
            "          - labels: '{{alertname=\"{alert}\",agent=\"{agent}\"}}'\n            value: 1\n"
        ));
    }
    let test = format!(
        "rule_files:\n  - {}\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{input}    promql_expr_test:\n      - expr: 'count by (alertname, agent) (ALERTS{{alertstate=\"firing\",alertname=~\"A2AGatewayA2A.*\"}})'\n        eval_time: 15m\n        exp_samples:\n{expected}",
        rules.display()
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("a2a.test.yml");
    std::fs::write(&file, &test).expect("test file");
    let out = std::process::Command::new("promtool")
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .expect("promtool on PATH (apt-get install -y prometheus)");
    assert!(
        out.status.success(),
        "promtool: {}{}\n{test}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_a2a_failure_makes_the_series_its_alert_fires_on() {
    // One scripted agent behind four routes, answering by the message's text.
    let release = Arc::new(tokio::sync::Notify::new());
    let go = release.clone();
    let script = ScriptedAgent::start(Arc::new(move |method, params| {
        let text = params["message"]["parts"][0]["text"].as_str().unwrap_or("");
        let done = || {
            let id = uuid::Uuid::new_v4().to_string();
            Box::new(Answer::Result(
                json!({"task": task(&id, "ctx", "TASK_STATE_COMPLETED")}),
            ))
        };
        match (method, text) {
            ("SendMessage", "slow") => Answer::Later(Duration::from_secs(4), done()),
            ("SendMessage", "hold") => Answer::Until(go.clone(), Duration::from_secs(20), done()),
            ("SendMessage", "internal") => {
                agent_error(-32603, "INTERNAL_ERROR", "a2a-protocol.org")
            }
            ("SendMessage", "own") => agent_error(-31000, "QUOTA_EXCEEDED", "example.com"),
            // A Task without a status: an answer that breaks A2A.
            ("SendMessage", "broken") => {
                Answer::Result(json!({"task": {"id": "b", "contextId": "c"}}))
            }
            _ => *done(),
        }
    }))
    .await;
    let mut stopped = ScriptedAgent::start(Arc::new(|_, _| {
        let id = uuid::Uuid::new_v4().to_string();
        Answer::Result(json!({"task": task(&id, "ctx", "TASK_STATE_COMPLETED")}))
    }))
    .await;
    let mut slow = a2a_agent("slow", &script.base);
    // Loose enough that a healthy call passes on a loaded machine; the slow one takes 4 s.
    slow.timeout = Duration::from_millis(1500);
    let mut busy = a2a_agent("busy", &script.base);
    busy.max_in_flight = 1;
    busy.timeout = Duration::from_secs(30);
    let mut down = a2a_agent("down", &stopped.base);
    down.eject_after = 0;
    let agents = vec![
        a2a_agent("fine", &script.base),
        slow,
        busy,
        a2a_agent("failing", &script.base),
        down,
    ];
    let (_gw, http) = gateway(agents, two_clients).await;
    let send = |agent: &'static str, text: &'static str| {
        let http = Http::new(http.base.clone());
        async move {
            rpc(
                &http,
                agent,
                Some(ALICE),
                "SendMessage",
                message(text, json!({})),
            )
            .await
        }
    };
    let ok = |v: &Value| assert!(v["result"]["task"]["id"].is_string(), "{v}");

    // A healthy agent, and the client's own mistakes.
    ok(&send("fine", "ok").await);
    let v = rpc(
        &http,
        "fine",
        Some(ALICE),
        "GetTask",
        json!({"id": "no-such-task"}),
    )
    .await;
    assert_eq!(error_code(&v), -32001, "{v}");
    let v = rpc(
        &http,
        "fine",
        Some(ALICE),
        "SendMessage",
        json!({"message": {"role": "ROLE_USER"}}),
    )
    .await;
    assert_eq!(error_code(&v), -32602, "{v}");

    // Slower than timeout_ms, on JSON-RPC (HTTP 200) and on HTTP+JSON (504).
    ok(&send("slow", "ok").await);
    let v = send("slow", "slow").await;
    assert_eq!(reason(&v), "AGENT_TIMEOUT", "{v}");
    let r = rest(
        &http,
        Method::POST,
        "/agents/slow/message:send",
        Some(ALICE),
        Some(message("slow", json!({}))),
    )
    .await;
    assert_eq!(r.status, 504, "{r:?}");

    // At max_in_flight: one message holds the only slot, the next is refused.
    let holder = tokio::spawn(send("busy", "hold"));
    wait_for("the agent holds the busy route's message", || async {
        script
            .calls()
            .iter()
            .any(|c| c["params"]["message"]["parts"][0]["text"] == "hold")
    })
    .await;
    let v = send("busy", "ok").await;
    assert_eq!(reason(&v), "AGENT_BUSY", "{v}");
    release.notify_one();
    ok(&holder.await.expect("the held message"));

    // The agent's own errors, and an answer that breaks A2A.
    ok(&send("failing", "ok").await);
    let v = send("failing", "internal").await;
    assert_eq!(error_code(&v), -32603, "{v}");
    let v = send("failing", "own").await;
    assert_eq!(error_code(&v), -31000, "{v}");
    let v = send("failing", "broken").await;
    assert_eq!(error_code(&v), -32006, "{v}");

    // The agent stopped: the connection refused.
    ok(&send("down", "ok").await);
    stopped.kill();
    for _ in 0..2 {
        let v = send("down", "ok").await;
        assert_eq!(reason(&v), "AGENT_UNREACHABLE", "{v}");
    }

    // Refused at the edge (a key that names no client): on requests_total only, not here.
    let r = http
        .send(
            Method::POST,
            "/agents/fine/jsonrpc",
            &[
                ("content-type", "application/json"),
                ("authorization", "Bearer not-a-key"),
            ],
            bytes::Bytes::from(
                json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                    "params": message("ok", json!({}))})
                .to_string(),
            ),
        )
        .await;
    assert_eq!(r.status, 401, "{r:?}");

    let r = http.get_as("/metrics", OPS).await;
    assert_eq!(r.status, 200, "{r:?}");
    let text = String::from_utf8(r.body.to_vec()).expect("UTF-8 exposition");
    let agents = ["fine", "slow", "busy", "failing", "down"];
    let series: Vec<_> = samples(&text)
        .into_iter()
        .filter(|(l, _)| agents.contains(&l["agent"].as_str()))
        .collect();
    let value = |agent: &str, method: &str, binding: &str, outcome: &str| {
        series
            .iter()
            .filter(|(l, _)| {
                l["agent"] == agent
                    && l["method"] == method
                    && l["binding"] == binding
                    && l["outcome"] == outcome
            })
            .map(|(_, v)| v)
            .sum::<f64>()
    };
    let sent = [
        ("fine", "SendMessage", "JSONRPC", "ok", 1.0),
        ("fine", "GetTask", "JSONRPC", "TASK_NOT_FOUND", 1.0),
        ("fine", "SendMessage", "JSONRPC", "INVALID_PARAMS", 1.0),
        ("slow", "SendMessage", "JSONRPC", "ok", 1.0),
        ("slow", "SendMessage", "JSONRPC", "AGENT_TIMEOUT", 1.0),
        ("slow", "SendMessage", "HTTP+JSON", "AGENT_TIMEOUT", 1.0),
        ("busy", "SendMessage", "JSONRPC", "ok", 1.0),
        ("busy", "SendMessage", "JSONRPC", "AGENT_BUSY", 1.0),
        ("failing", "SendMessage", "JSONRPC", "ok", 1.0),
        ("failing", "SendMessage", "JSONRPC", "INTERNAL_ERROR", 1.0),
        ("failing", "SendMessage", "JSONRPC", "agent_error", 1.0),
        (
            "failing",
            "SendMessage",
            "JSONRPC",
            "INVALID_AGENT_RESPONSE",
            1.0,
        ),
        ("down", "SendMessage", "JSONRPC", "ok", 1.0),
        ("down", "SendMessage", "JSONRPC", "AGENT_UNREACHABLE", 2.0),
    ];
    for (agent, method, binding, outcome, n) in sent {
        assert_eq!(
            value(agent, method, binding, outcome),
            n,
            "{agent} {method} {binding} {outcome}:\n{series:#?}"
        );
    }
    let total: f64 = sent.iter().map(|s| s.4).sum();
    assert_eq!(
        series.iter().map(|(_, v)| v).sum::<f64>(),
        total,
        "no other call counted: {series:#?}"
    );
    // Every series carries the caller's client and the call's version.
    for (l, _) in &series {
        assert_eq!(l["client"], "alice", "{l:?}");
        assert_eq!(l["version"], "1.0", "{l:?}");
    }
    // What the 5xx alert reads: every JSON-RPC failure was an HTTP 200.
    for agent in ["down", "failing", "busy"] {
        let fives: f64 = ["500", "502", "503", "504"]
            .iter()
            .map(|s| {
                metric_value(
                    &text,
                    "a2a_gateway_requests_total",
                    &[("agent", agent), ("status", s)],
                )
            })
            .sum();
        assert_eq!(fives, 0.0, "{agent}: no 5xx on requests_total");
        assert!(
            metric_value(
                &text,
                "a2a_gateway_requests_total",
                &[("agent", agent), ("status", "200")]
            ) >= 2.0,
            "{agent}: its failures counted as HTTP 200"
        );
    }

    // The refused answer is counted as the agent's protocol violation too (the runbook's
    // pointer).
    assert!(
        metric_value(
            &text,
            "a2a_gateway_protocol_violations_total",
            &[("agent", "failing")]
        ) >= 1.0,
        "{text}"
    );

    // Each outcome exported is matched by its failure's rule and by no other.
    let rules = rule_outcomes();
    let party_of = |agent: &str| match agent {
        "down" => Party::Gateway,
        "slow" => Party::Timeout,
        "busy" => Party::Busy,
        "failing" => Party::Agent,
        _ => Party::Client,
    };
    for (l, _) in &series {
        let (agent, outcome) = (l["agent"].as_str(), l["outcome"].as_str());
        let want: Vec<&str> = if outcome == "ok" {
            Vec::new()
        } else {
            party_of(agent).rule().into_iter().collect()
        };
        assert_eq!(
            matched_by(&rules, outcome),
            want,
            "{agent}'s outcome {outcome}"
        );
    }

    // And Prometheus's own evaluation of the shipped rules on these series.
    let mut want: Vec<(&str, &str)> = agents
        .iter()
        .filter_map(|a| party_of(a).rule().map(|r| (r, *a)))
        .collect();
    want.sort();
    assert_eq!(want.len(), 4);
    tokio::task::block_in_place(|| alerts_fire_on(&series, &want));
}
