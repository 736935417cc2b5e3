//! What deploy/ ships for monitoring names only what a live gateway exports: every
//! `a2a_gateway_*` family in the Grafana dashboard (deploy/grafana/a2a-gateway.json) and the
//! alert rules (deploy/prometheus/alerts.yml) is in a real scrape of `/metrics`, and every label
//! their queries select on, group by or match on is carried by the families they name (with
//! each literal `label="value"` seen in the scrape). A labelled family is exported only once a
//! series exists, so the test first drives the events behind each one: traffic from three
//! clients, a 401, a 422, a 429, a protocol violation, a late answer, pushes accepted and
//! refused, a stream and a refused one, a reload, an agent whose card is refused, and webhook
//! subscribers that deliver, retry, dead-letter and answer 410, and an official A2A task's push
//! config delivered (`subscriber="a2a_push"`); and, on a second gateway with
//! Redis and TLS, the Redis series and a refused handshake.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{json, Value};

use a2a_gateway::config::{Right, SubscriberConfig};
use sample::{Reply, Route};

use crate::auth::client;
use crate::support::a2a_script::{task, Answer, ScriptedAgent};
use crate::support::hook::Hook;
use crate::support::redis_server::RedisServer;
use crate::support::tls::{Ca, Files};
use crate::support::*;

const OPS: &str = "ops-key-0123456789abcdef";
const SLOW: &str = "slow-key-0123456789abcdef";

/// Labels Prometheus adds to every scraped series (target labels): not in the exposition.
const TARGET_LABELS: &[&str] = &["job", "instance"];

/// A family's label names and the values seen for each, from one scrape.
type Labels = BTreeMap<String, BTreeSet<String>>;

pub(crate) fn repo_file(path: &str) -> String {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// Every `a2a_gateway_[a-z0-9_]+` in `text`, as written.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("a2a_gateway_") {
        let before = &rest[..at];
        let tail = &rest[at + "a2a_gateway_".len()..];
        let len = tail
            .bytes()
            .take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_')
            .count();
        let glued = before
            .bytes()
            .last()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_');
        if len > 0 && !glued {
            out.insert(format!("a2a_gateway_{}", &tail[..len]));
        }
        rest = &tail[len..];
    }
    out
}

/// The family a sample name belongs to: histogram series lose `_bucket`, `_sum`, `_count`.
fn family(name: &str) -> &str {
    ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(name)
}

/// `k="v",k2="v2"` (the inside of a sample's braces) as pairs; values unescaped.
pub(crate) fn sample_labels(inner: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = inner.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let name: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if name.is_empty() {
            return out;
        }
        assert_eq!(chars.next(), Some('"'), "a quoted value in {{{inner}}}");
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => value.push(chars.next().unwrap_or('\\')),
                '"' => break,
                c => value.push(c),
            }
        }
        out.push((name.trim().to_owned(), value));
    }
}

/// Every family with at least one sample in the exposition, with its labels and their values.
fn exported(text: &str) -> BTreeMap<String, Labels> {
    let mut out = BTreeMap::<String, Labels>::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let end = line.find(['{', ' ']).unwrap_or(line.len());
        let labels = &mut *out.entry(family(&line[..end]).to_owned()).or_default();
        if line[end..].starts_with('{') {
            let close = line.rfind('}').expect("a closing brace");
            for (k, v) in sample_labels(&line[end + 1..close]) {
                labels.entry(k).or_default().insert(v);
            }
        }
    }
    out
}

/// The PromQL of every alert rule: `expr: |` blocks and one-line `expr:`s.
pub(crate) fn rule_exprs(yaml: &str) -> Vec<String> {
    let lines: Vec<&str> = yaml.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.trim_start().strip_prefix("expr:") else {
            continue;
        };
        let rest = rest.trim();
        if !rest.starts_with('|') && !rest.starts_with('>') {
            out.push(rest.trim_matches(['"', '\'']).to_owned());
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let block: Vec<&str> = lines[i + 1..]
            .iter()
            .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > indent)
            .map(|l| l.trim())
            .collect();
        out.push(block.join("\n"));
    }
    out
}

/// Every alert rule as (its name, its PromQL), in the file's order: each `- alert:` with the
/// expression [`rule_exprs`] reads after it.
pub(crate) fn alert_exprs(yaml: &str) -> Vec<(String, String)> {
    let names: Vec<String> = yaml
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("- alert:"))
        .map(|n| n.trim().to_owned())
        .collect();
    let exprs = rule_exprs(yaml);
    assert_eq!(
        names.len(),
        exprs.len(),
        "one expression per alert: {names:?}"
    );
    names.into_iter().zip(exprs).collect()
}

/// The PromQL of every dashboard panel, and its template variables' `label_values(...)`.
fn dashboard_exprs(dashboard: &Value) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(panels: &Value, out: &mut Vec<String>) {
        for p in panels.as_array().into_iter().flatten() {
            for t in p["targets"].as_array().into_iter().flatten() {
                if let Some(e) = t["expr"].as_str() {
                    out.push(e.to_owned());
                }
            }
            walk(&p["panels"], out);
        }
    }
    walk(&dashboard["panels"], &mut out);
    for v in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let q = v["query"]["query"].as_str().or(v["query"].as_str());
        if let Some(q) = q.filter(|q| q.contains("a2a_gateway_")) {
            out.push(q.to_owned());
        }
    }
    out
}

/// The label lists of `by (...)`, `without (...)`, `on (...)`, `ignoring (...)`,
/// `group_left (...)`, `group_right (...)` in `expr`.
fn grouping_labels(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for kw in [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ] {
        let mut rest = expr;
        while let Some(at) = rest.find(kw) {
            let before_ok = rest[..at]
                .bytes()
                .last()
                .is_none_or(|b| !(b.is_ascii_alphanumeric() || b == b'_'));
            let after = rest[at + kw.len()..].trim_start();
            rest = &rest[at + kw.len()..];
            if !before_ok || !after.starts_with('(') {
                continue;
            }
            let close = after.find(')').expect("a closing parenthesis");
            out.extend(
                after[1..close]
                    .split(',')
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_owned),
            );
        }
    }
    out
}

/// One label matcher of a selector: (label, operator, value).
pub(crate) type Matcher = (String, String, String);

/// Each `a2a_gateway_x{...}` selector in `expr`: (name, its matchers).
pub(crate) fn selectors(expr: &str) -> Vec<(String, Vec<Matcher>)> {
    let mut out = Vec::new();
    for name in metric_names(expr) {
        let mut rest = expr;
        while let Some(at) = rest.find(&name) {
            let after = &rest[at + name.len()..];
            rest = after;
            if after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
                continue; // a longer name
            }
            let Some(inner) = after.strip_prefix('{') else {
                continue;
            };
            let mut matchers = Vec::new();
            let mut s = inner;
            loop {
                s = s.trim_start_matches([',', ' ', '\n']);
                if s.starts_with('}') || s.is_empty() {
                    break;
                }
                let op_at = s.find(['=', '!']).expect("a matcher operator");
                let label = s[..op_at].trim().to_owned();
                let op_len = if s[op_at..].starts_with("=~")
                    || s[op_at..].starts_with("!=")
                    || s[op_at..].starts_with("!~")
                {
                    2
                } else {
                    1
                };
                let op = s[op_at..op_at + op_len].to_owned();
                let v = s[op_at + op_len..].trim_start();
                let v = v.strip_prefix('"').expect("a quoted matcher value");
                let end = v.find('"').expect("the value's closing quote");
                matchers.push((label, op, v[..end].to_owned()));
                s = &v[end + 1..];
            }
            out.push((name.clone(), matchers));
        }
    }
    out
}

/// `label_values(metric, label)` in a template variable's query.
fn label_values_call(expr: &str) -> Option<(String, String)> {
    let inner = expr
        .trim()
        .strip_prefix("label_values(")?
        .strip_suffix(')')?;
    let (m, l) = inner.split_once(',')?;
    Some((m.trim().to_owned(), l.trim().to_owned()))
}

/// What in `exprs` (from `file`) does not fit the scrape: labels a family does not carry,
/// literal values never seen, grouping labels none of the expression's families carries.
fn label_problems(file: &str, exprs: &[String], scrape: &BTreeMap<String, Labels>) -> Vec<String> {
    let mut problems = Vec::new();
    let labels_of = |name: &str| scrape.get(family(name));
    for expr in exprs {
        let short: String = expr.split_whitespace().collect::<Vec<_>>().join(" ");
        if let Some((metric, label)) = label_values_call(expr) {
            if !labels_of(&metric).is_some_and(|l| l.contains_key(&label)) {
                problems.push(format!("{file}: {short}: {metric} has no label {label:?}"));
            }
            continue;
        }
        for (name, matchers) in selectors(expr) {
            let Some(labels) = labels_of(&name) else {
                continue; // reported as a missing family
            };
            for (label, op, value) in matchers {
                match labels.get(&label) {
                    None => problems.push(format!(
                        "{file}: {short}: {name} has no label {label:?} (it has {:?})",
                        labels.keys().collect::<Vec<_>>()
                    )),
                    Some(seen) if op == "=" && !value.contains('$') && !seen.contains(&value) => {
                        problems.push(format!(
                            "{file}: {short}: {name}{{{label}=\"{value}\"}} never seen (values: {seen:?})"
                        ))
                    }
                    Some(_) => {}
                }
            }
        }
        let families: Vec<&Labels> = metric_names(expr)
            .iter()
            .filter_map(|n| labels_of(n))
            .collect();
        for label in grouping_labels(expr) {
            if TARGET_LABELS.contains(&label.as_str()) {
                continue;
            }
            if !families.iter().any(|l| l.contains_key(&label)) {
                problems.push(format!(
                    "{file}: {short}: no family it names carries {label:?}"
                ));
            }
        }
    }
    problems
}

fn subscriber(name: &str, hook: &Hook) -> SubscriberConfig {
    SubscriberConfig::new(name, &hook.url())
}

/// Wait until the scrape (as OPS) has `family` with these labels at `at_least`.
async fn wait_metric(g: &TestGateway, family: &str, labels: &[(&str, &str)], at_least: f64) {
    let what = format!("{family}{labels:?} >= {at_least}");
    wait_for_within(&what, Duration::from_secs(20), || async {
        let r = g.http.get_as("/metrics", OPS).await;
        metric_value(&String::from_utf8_lossy(&r.body), family, labels) >= at_least
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_dashboard_and_alert_rules_name_is_exported() {
    let a = agent().await;
    // An agent whose card is never valid: refused (card_refusals_total), no card served.
    let broken = agent().await;
    broken.script(
        Route::Card,
        Reply::Json(200, json!({"name": "not an A2A card"})),
    );
    let ok = Hook::start().await;
    let flaky = Hook::start().await;
    flaky.answer_next(500, None);
    let dead = Hook::start().await;
    dead.set_status(302);
    let gone = Hook::start().await;
    gone.answer_next(410, None);
    // An official A2A agent: its task is polled (it neither pushes nor streams) and completes.
    let echo = ScriptedAgent::start(std::sync::Arc::new(
        |method: &str, params: &Value| match method {
            "SendMessage" => {
                Answer::Result(json!({"task": task("m-1", "c-1", "TASK_STATE_WORKING")}))
            }
            _ => Answer::Result(task(
                params["id"].as_str().unwrap_or(""),
                "c-1",
                "TASK_STATE_COMPLETED",
            )),
        },
    ))
    .await;
    let g = TestGateway::start(&[("a", &a), ("broken", &broken)], |cfg| {
        let mut e = crate::a2a_gateway::a2a_agent("echo", &echo.base);
        e.poll_interval = Duration::from_millis(100);
        cfg.agents.push(e);
        ingest(cfg);
        cfg.agents[0].timeout = Duration::from_secs(1);
        let mut ops = client("ops", OPS, &["*"], &Right::ALL);
        ops.max_streams = 1;
        let mut slow = client("slow", SLOW, &["*"], &[Right::Tasks]);
        slow.rate_per_sec = Some(0.01);
        slow.burst = Some(1);
        cfg.clients = vec![ops, slow];
        cfg.subscribers = vec![
            subscriber("ok", &ok),
            subscriber("flaky", &flaky),
            subscriber("dead", &dead),
            subscriber("gone", &gone),
        ];
        cfg.webhooks.allow = vec!["127.0.0.1/32".into()];
        cfg.webhooks.retry_schedule_secs = vec![1];
        cfg.webhooks.timeout = Duration::from_secs(2);
    })
    .await;
    g.ready().await;
    let create =
        |key: &'static str, body: Value, extra: &'static [(&'static str, &'static str)]| {
            let http = g.http.clone();
            async move {
                http.post_json_as("/agents/a/tasks", key, &body, extra)
                    .await
            }
        };
    let good = || json!({ "input": good_input() });

    // Requests, a transition, an idempotency key, and a change for every subscriber.
    let r = create(OPS, good(), &[("idempotency-key", "monitoring-1")]).await;
    assert_eq!(r.status, 202, "{r:?}");
    let id = r.json()["task_id"].as_str().expect("task_id").to_owned();
    // 401 at the edge.
    assert_eq!(g.http.get("/agents").await.status, 401);
    // 422: an input the card's schema refuses.
    let r = create(OPS, json!({ "input": { "topic": 42 } }), &[]).await;
    assert_eq!(r.status, 422, "{r:?}");
    // 429: past its rate.
    assert_eq!(create(SLOW, good(), &[]).await.status, 202);
    assert_api_error(&create(SLOW, good(), &[]).await, 429, "RATE_LIMITED");
    // An answer that breaks A2A 1.0.
    a.script_once(
        Route::CreateTask,
        Reply::Json(202, json!({"not": "a task"})),
    );
    let r = create(OPS, good(), &[]).await;
    assert!(r.status >= 500, "{r:?}");
    // A create answered after its timeout: a late answer, recorded.
    a.script_once(
        Route::CreateTask,
        Reply::Delay(Duration::from_millis(1500), Box::new(Reply::Default)),
    );
    assert_api_error(&create(OPS, good(), &[]).await, 504, "AGENT_TIMEOUT");
    // Pushes: accepted, refused for the token, and refused by the state machine.
    assert_eq!(
        g.http
            .push_task("a", TOKEN, &moved(&a, &id, "COMPLETED"))
            .await
            .status,
        202
    );
    assert_eq!(
        g.http
            .push_task("a", "not-the-token", &moved(&a, &id, "COMPLETED"))
            .await
            .status,
        401
    );
    let backwards = doc_at(&a, &id, "WORKING", chrono::Utc::now().timestamp_millis());
    assert_eq!(g.http.push_task("a", TOKEN, &backwards).await.status, 409);
    // A stream held open, and one past the client's max_streams.
    let live = g
        .http
        .post_json_as("/agents/a/tasks", OPS, &good(), &[])
        .await;
    assert_eq!(live.status, 202, "{live:?}");
    let live = live.json()["task_id"].as_str().expect("task_id").to_owned();
    let path = format!("/agents/a/tasks/{live}/stream?access_token={OPS}");
    let held = g.http.open(&path).await;
    assert_eq!(held.status(), 200);
    assert_eq!(g.http.open(&path).await.status(), 429);
    // An A2A push config, delivered.
    let mut m = crate::support::a2a_calls::message("hook me", json!({}));
    m["configuration"] = json!({"taskPushNotificationConfig": {"url": ok.url()}});
    let sent = crate::support::a2a_calls::rpc(&g.http, "echo", Some(OPS), "SendMessage", m).await;
    assert_eq!(sent["result"]["task"]["id"], "m-1", "{sent}");
    // A reload (the same config).
    g.gw.reload((*g.gw.config()).clone())
        .await
        .expect("reload applied");

    // What arrives later: the late answer, and each subscriber's outcome.
    wait_metric(
        &g,
        "a2a_gateway_late_answers_total",
        &[("outcome", "recorded")],
        1.0,
    )
    .await;
    for (sub, outcome) in [
        ("ok", "delivered"),
        ("flaky", "retry"),
        ("flaky", "delivered"),
        ("dead", "dead"),
        ("gone", "disabled"),
    ] {
        wait_metric(
            &g,
            "a2a_gateway_webhook_deliveries_total",
            &[("subscriber", sub), ("outcome", outcome)],
            1.0,
        )
        .await;
    }
    wait_metric(
        &g,
        "a2a_gateway_webhook_deliveries_total",
        &[
            ("subscriber", "a2a_push"),
            ("agent", "echo"),
            ("outcome", "delivered"),
        ],
        1.0,
    )
    .await;
    wait_metric(&g, "a2a_gateway_webhook_subscribers_disabled", &[], 1.0).await;
    wait_metric(
        &g,
        "a2a_gateway_card_refusals_total",
        &[("agent", "broken")],
        1.0,
    )
    .await;

    let r = g.http.get_as("/metrics", OPS).await;
    assert_eq!(r.status, 200, "{r:?}");
    let text = String::from_utf8(r.body.to_vec()).expect("UTF-8 exposition");
    let mut scrape = exported(&text);
    drop(held);

    // What only a gateway on Redis and TLS exports (redis_*, tls_*): a second one, on a
    // redis-server of the test's own, that refuses a plaintext handshake.
    let redis = RedisServer::start();
    let ca = Ca::new("monitoring CA");
    let files = Files::new();
    let b = agent().await;
    let g2 = TestGateway::start(&[("a", &b)], |cfg| {
        cfg.redis = Some(redis.config("monitoring:"));
        cfg.tls = Some(files.tls("server", &ca.server(), None));
    })
    .await;
    let plain = Http::new(format!("http://{}", g2.gw.addr()));
    let refused = plain
        .try_send(hyper::Method::GET, "/healthz", &[], bytes::Bytes::new())
        .await;
    assert!(refused.is_err(), "{refused:?}");
    let text2 = || String::from_utf8(g2.gw.metrics().encode()).expect("UTF-8 exposition");
    wait_for_within(
        "redis_up 1 and a plaintext handshake refused",
        Duration::from_secs(20),
        || async {
            let t = text2();
            metric_value(&t, "a2a_gateway_redis_up", &[]) == 1.0
                && metric_value(
                    &t,
                    "a2a_gateway_tls_handshake_failures_total",
                    &[("reason", "not_tls")],
                ) >= 1.0
        },
    )
    .await;
    let text2 = text2();
    for (family, labels) in exported(&text2) {
        let into = scrape.entry(family).or_default();
        for (label, values) in labels {
            into.entry(label).or_default().extend(values);
        }
    }
    let text = format!("{text}\n{text2}");

    let dashboard_text = repo_file("deploy/grafana/a2a-gateway.json");
    let dashboard: Value = serde_json::from_str(&dashboard_text).expect("the dashboard is JSON");
    let rules_text = repo_file("deploy/prometheus/alerts.yml");
    let mut named: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for (file, text) in [
        ("deploy/grafana/a2a-gateway.json", &dashboard_text),
        ("deploy/prometheus/alerts.yml", &rules_text),
    ] {
        for name in metric_names(text) {
            named
                .entry(family(&name).to_owned())
                .or_default()
                .insert(file);
        }
    }
    assert!(
        named.len() >= 30 && named.contains_key("a2a_gateway_webhook_dead_letters"),
        "the files were read: {named:?}"
    );
    let missing: Vec<String> = named
        .iter()
        .filter(|(f, _)| !scrape.contains_key(*f))
        .map(|(f, files)| format!("{f} (named in {files:?})"))
        .collect();
    assert!(
        missing.is_empty(),
        "{} metric families named in deploy/ are not in the scrape of a live gateway:\n  {}\n\nscrape:\n{text}",
        missing.len(),
        missing.join("\n  ")
    );

    let rule_exprs = rule_exprs(&rules_text);
    assert_eq!(
        rule_exprs.len(),
        rules_text.matches("- alert:").count(),
        "one expression per alert"
    );
    let dashboard_exprs = dashboard_exprs(&dashboard);
    assert!(dashboard_exprs.len() >= 40, "{dashboard_exprs:?}");
    let mut problems = label_problems("alerts.yml", &rule_exprs, &scrape);
    problems.extend(label_problems(
        "a2a-gateway.json",
        &dashboard_exprs,
        &scrape,
    ));
    assert!(
        problems.is_empty(),
        "{} label problems:\n  {}",
        problems.len(),
        problems.join("\n  ")
    );

    // A2AGatewayAgentWithoutCard reads "failing fetches and no card_age_seconds series" as
    // "never had a card": true of this gateway's agents.
    let card_age = &scrape["a2a_gateway_card_age_seconds"]["agent"];
    assert!(card_age.contains("a"), "{card_age:?}");
    assert!(!card_age.contains("broken"), "{card_age:?}");
    assert!(
        metric_value(
            &text,
            "a2a_gateway_card_fetches_total",
            &[("agent", "broken"), ("result", "invalid")]
        ) >= 1.0
    );
}

/// The parsing the test above relies on, on inputs of known shape: a wrong reading there would
/// let a misnamed metric or label through.
#[test]
fn the_expression_readers_find_names_selectors_and_groupings() {
    let expr = r#"sum by (agent, le) (rate(a2a_gateway_request_duration_seconds_bucket{agent=~"$agent", agent!="", outcome="dead"}[5m])) / on (job, agent) group_left max without (instance) (a2a_gateway_tasks)"#;
    assert_eq!(
        metric_names(expr).into_iter().collect::<Vec<_>>(),
        [
            "a2a_gateway_request_duration_seconds_bucket",
            "a2a_gateway_tasks"
        ]
    );
    assert_eq!(
        grouping_labels(expr).into_iter().collect::<Vec<_>>(),
        ["agent", "instance", "job", "le"]
    );
    let sel = selectors(expr);
    assert_eq!(sel.len(), 1, "{sel:?}");
    assert_eq!(sel[0].0, "a2a_gateway_request_duration_seconds_bucket");
    let m: Vec<(&str, &str, &str)> = sel[0]
        .1
        .iter()
        .map(|(l, o, v)| (l.as_str(), o.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        m,
        [
            ("agent", "=~", "$agent"),
            ("agent", "!=", ""),
            ("outcome", "=", "dead")
        ]
    );
    assert_eq!(
        family("a2a_gateway_request_duration_seconds_bucket"),
        "a2a_gateway_request_duration_seconds"
    );
    assert!(metric_names("xa2a_gateway_foo `a2a_gateway_`").is_empty());
    let yaml = "      - alert: X\n        expr: |\n          max by (job) (a2a_gateway_x) > 0\n          and on (job) a2a_gateway_y\n        for: 1m\n      - alert: Y\n        expr: a2a_gateway_z == 1\n";
    assert_eq!(
        rule_exprs(yaml),
        [
            "max by (job) (a2a_gateway_x) > 0\nand on (job) a2a_gateway_y",
            "a2a_gateway_z == 1"
        ]
    );
    let named = alert_exprs(yaml);
    let names: Vec<&str> = named.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["X", "Y"]);
    assert_eq!(named[1].1, "a2a_gateway_z == 1");
    let scrape = exported(
        "# TYPE a2a_gateway_x counter\na2a_gateway_x{agent=\"a\",outcome=\"ok\"} 1\na2a_gateway_h_bucket{le=\"+Inf\"} 2\n",
    );
    let exprs = [
        r#"sum by (agent, subscriber) (a2a_gateway_x{outcome="dead", nope=~".*"})"#.to_owned(),
        "label_values(a2a_gateway_x, client)".to_owned(),
        r#"histogram_quantile(0.5, sum by (le) (rate(a2a_gateway_h_bucket[5m])))"#.to_owned(),
    ];
    let problems = label_problems("t", &exprs, &scrape);
    assert_eq!(problems.len(), 4, "{problems:#?}");
    for want in [
        "no family it names carries \"subscriber\"",
        "has no label \"nope\"",
        "outcome=\"dead\"} never seen",
        "has no label \"client\"",
    ] {
        assert!(
            problems.iter().any(|p| p.contains(want)),
            "{want}: {problems:#?}"
        );
    }
}
