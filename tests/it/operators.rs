//! What an operator runs, through the real binary: `--version`, `completions`, `man`, `probe`
//! (the container health check), options a subcommand does not take refused, and JSON logs
//! with the access log and trace ids, with no secret in them.

use hyper::Method;
use serde_json::Value;

use crate::support::child::*;
use crate::support::collector::Collector;
use crate::support::*;

#[tokio::test]
async fn version_completions_and_the_man_page() {
    let f = run(&["--version"]).await;
    assert!(f.status.success(), "{f:?}");
    assert_eq!(
        f.stdout.trim(),
        format!("a2a-gateway {}", env!("CARGO_PKG_VERSION"))
    );
    for shell in ["bash", "zsh", "fish"] {
        let f = run(&["completions", shell]).await;
        assert!(f.status.success(), "{shell}: {f:?}");
        for word in [
            "a2a-gateway",
            "check-config",
            "probe",
            "config",
            "timeout-ms",
        ] {
            assert!(f.stdout.contains(word), "{shell} completions lack {word}");
        }
        if shell == "bash" {
            // The script is one bash really loads, and it registers the completion.
            let script = temp_config(&f.stdout);
            let out = std::process::Command::new("bash")
                .arg("-c")
                .arg(format!(
                    "source {} && complete -p a2a-gateway",
                    path_of(&script)
                ))
                .output()
                .expect("bash runs");
            assert!(out.status.success(), "{out:?}");
        }
    }
    let f = run(&["completions", "tcsh"]).await;
    assert_eq!(f.status.code(), Some(2), "{f:?}");
    assert!(
        f.stderr.contains("bash"),
        "the valid shells are listed: {f:?}"
    );
    let f = run(&["man"]).await;
    assert!(f.status.success(), "{f:?}");
    assert!(
        f.stdout.starts_with(".ie") || f.stdout.contains(".TH a2a-gateway"),
        "{f:?}"
    );
    for word in ["check\\-config", "probe", "completions", "SIGHUP"] {
        assert!(f.stdout.contains(word), "the man page lacks {word}");
    }
}

#[tokio::test]
async fn options_a_subcommand_ignores_are_refused() {
    for args in [
        &["demo", "--config", "x.toml"][..],
        &["--config", "x.toml", "demo"][..],
        &["sample-agent", "--config", "x.toml"][..],
        &["probe", "--config", "x.toml", "http://127.0.0.1:9/"][..],
    ] {
        let f = run(args).await;
        assert_eq!(f.status.code(), Some(2), "{args:?} was accepted: {f:?}");
        assert_no_panic(&f);
    }
    // Each subcommand's help stands on its own.
    let f = run(&["probe", "--help"]).await;
    assert!(f.status.success(), "{f:?}");
    assert!(
        f.stdout.contains("--timeout-ms") && f.stdout.contains("2xx"),
        "{f:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn probe_exits_0_only_on_a_2xx_answer() {
    let (_a, g) = single("a", |_| {}).await;
    let base = format!("http://{}", g.gw.addr());
    let probe = |url: String| async move {
        let f = run(&["probe", "--timeout-ms", "1000", &url]).await;
        assert_no_panic(&f);
        f
    };
    let ok = probe(format!("{base}/readyz")).await;
    assert_eq!(ok.status.code(), Some(0), "{ok:?}");
    let missing = probe(format!("{base}/no-such-route")).await;
    assert_eq!(missing.status.code(), Some(1), "{missing:?}");
    assert!(missing.stderr.contains("404"), "{missing:?}");
    let closed = probe("http://127.0.0.1:9/readyz".into()).await;
    assert_eq!(closed.status.code(), Some(1), "{closed:?}");
    let odd = probe("ftp://127.0.0.1/readyz".into()).await;
    assert_eq!(odd.status.code(), Some(1), "{odd:?}");
    // A draining gateway is not ready: the probe says so.
    g.gw.shutdown().await;
    let gone = probe(format!("{base}/readyz")).await;
    assert_eq!(gone.status.code(), Some(1), "{gone:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn json_logs_carry_the_access_log_and_trace_ids_and_no_secret() {
    let collector = Collector::start().await;
    let a = agent().await;
    let config = temp_config(&format!(
        "listen = \"127.0.0.1:0\"\nlog_format = \"json\"\naccess_log = true\n\
         [[agents]]\nname = \"a\"\nurl = \"{}\"\ningest_token = \"{TOKEN}\"\n\
         [telemetry]\notlp_endpoint = \"{}\"\n",
        a.base_url(),
        collector.endpoint()
    ));
    let (p, _addr, http) = serve(&config, &[]).await;
    http.ready().await;
    let trace = "5bf92f3577b34da6a3ce929d0e0e4736";
    let parent = format!("00-{trace}-00f067aa0ba902b7-01");
    let created = http
        .send(
            Method::POST,
            "/agents/a/tasks?access_token=never-logged",
            &[
                ("content-type", "application/json"),
                ("traceparent", &parent),
            ],
            serde_json::json!({ "input": good_input() }).to_string(),
        )
        .await;
    assert_eq!(created.status, 202, "{created:?}");
    let id = created.json()["task_id"].as_str().expect("id").to_owned();
    // A push the ledger refuses (COMPLETED is final) logs a warning inside a traced request.
    let done = moved(&a, &id, "COMPLETED");
    assert!(http.push_task("a", TOKEN, &done).await.status < 300);
    let late = moved(&a, &id, "WORKING");
    let refused = http
        .send(
            Method::POST,
            "/agents/a/notifications",
            &[
                ("content-type", "application/json"),
                ("authorization", &format!("Bearer {TOKEN}")),
                ("traceparent", &parent),
            ],
            notification(&late).to_string(),
        )
        .await;
    assert!(refused.status < 500, "{refused:?}");
    let f = p.terminate().await;
    assert!(f.status.success(), "{f:?}");

    let lines: Vec<Value> = f
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(!lines.is_empty());
    for l in &lines {
        for key in ["timestamp", "level", "target", "message"] {
            assert!(l[key].is_string(), "{key} missing in {l}");
        }
    }
    let access: Vec<&Value> = lines
        .iter()
        .filter(|l| l["target"] == "a2a_gateway::access")
        .collect();
    let create = access
        .iter()
        .find(|l| l["route"] == "create_task")
        .unwrap_or_else(|| panic!("no access line for the create: {lines:#?}"));
    assert_eq!(create["status"], 202);
    assert_eq!(create["agent"], "a");
    assert_eq!(create["client"], "anonymous");
    assert_eq!(create["method"], "POST");
    assert_eq!(create["trace_id"], trace);
    assert!(create["duration_ms"].as_f64().is_some_and(|d| d >= 0.0));
    assert_eq!(
        create["request_id"].as_str(),
        created.header("x-request-id"),
        "{create}"
    );
    // Probes and pushes are logged too: one line per request.
    assert!(access.iter().any(|l| l["route"] == "readyz"));
    assert_eq!(
        access
            .iter()
            .filter(|l| l["route"] == "notifications")
            .count(),
        2
    );
    let warning = lines
        .iter()
        .find(|l| l["level"] == "WARN" && l["reason"].is_string())
        .unwrap_or_else(|| panic!("no refusal warning: {lines:#?}"));
    assert_eq!(warning["trace_id"], trace, "{warning}");
    // Neither the ingest token nor a query's credential is ever written.
    for secret in [TOKEN, "never-logged"] {
        assert!(!f.output().contains(secret), "{secret} was logged");
    }
}
