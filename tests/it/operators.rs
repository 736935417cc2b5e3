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

/// Every `name(1)` a man page refers to (roff escapes undone), e.g. `a2a-gateway-probe`.
fn page_references(roff: &str) -> Vec<String> {
    let text = roff.replace("\\-", "-");
    let mut out = Vec::new();
    for (at, _) in text.match_indices("(1)") {
        let name: String = text[..at]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if !name.is_empty() {
            out.push(name);
        }
    }
    out
}

#[tokio::test]
async fn the_man_page_names_only_pages_that_exist() {
    let subcommands = [
        "check-config",
        "demo",
        "sample-agent",
        "probe",
        "completions",
        "example-config",
        "man",
    ];
    // On stdout: one page, which refers to no other page and describes every subcommand
    // with its options in place.
    let f = run(&["man"]).await;
    assert!(f.status.success(), "{f:?}");
    assert_eq!(
        page_references(&f.stdout),
        Vec::<String>::new(),
        "{}",
        f.stdout
    );
    for sub in subcommands {
        let usage = format!("a2a\\-gateway {}", sub.replace('-', "\\-"));
        assert!(
            f.stdout.contains(&usage),
            "{sub} is not described: {}",
            f.stdout
        );
    }
    for option in [
        "\\-\\-timeout\\-ms MS",
        "\\-\\-progress\\fR",
        "\\-\\-dir DIR",
    ] {
        assert!(f.stdout.contains(option), "{option}: {}", f.stdout);
    }
    // With --dir: the main page and one per subcommand, and every page any of them names is
    // one of them.
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("man1");
    let f = run(&["man", "--dir", out.to_str().expect("utf-8")]).await;
    assert!(f.status.success(), "{f:?}");
    let mut written: Vec<String> = std::fs::read_dir(&out)
        .expect("pages written")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    let mut want: Vec<String> = subcommands
        .iter()
        .map(|s| format!("a2a-gateway-{s}.1"))
        .chain(["a2a-gateway.1".to_owned()])
        .collect();
    want.sort();
    assert_eq!(written, want);
    let mut named = 0;
    for page in &written {
        let text = std::fs::read_to_string(out.join(page)).expect("page");
        assert!(text.contains(".TH"), "{page} is a man page");
        for reference in page_references(&text) {
            named += 1;
            assert!(
                out.join(format!("{reference}.1")).is_file(),
                "{page} names {reference}(1), which was not written"
            );
        }
    }
    assert!(
        named >= subcommands.len(),
        "the main page lists the subcommands' pages"
    );
}

#[tokio::test]
async fn example_config_prints_the_commented_config_and_check_config_accepts_it() {
    let f = run(&["example-config"]).await;
    assert!(f.status.success(), "{f:?}");
    let shipped =
        std::fs::read_to_string(repo("config/gateway.toml")).expect("config/gateway.toml");
    assert_eq!(
        f.stdout, shipped,
        "example-config prints config/gateway.toml as it is"
    );
    assert!(
        f.stdout.lines().filter(|l| l.starts_with('#')).count() > 100,
        "commented"
    );
    let file = temp_config(&f.stdout);
    let checked = run(&["check-config", "--config", path_of(&file)]).await;
    assert!(checked.status.success(), "{checked:?}");
    assert!(checked.stdout.contains(": ok ("), "{checked:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn serving_in_text_mode_logs_one_line_about_the_config_it_loaded() {
    let (a, b) = (agent().await, agent().await);
    let config = temp_config(&format!(
        "listen = \"127.0.0.1:0\"\n\
         [[clients]]\nname = \"ops\"\nkey_sha256 = \"{}\"\ncan = [\"metrics\"]\n\
         [[agents]]\nname = \"scripts\"\nurl = \"{}\"\n\
         [[agents]]\nname = \"summaries\"\nurl = \"{}\"\n",
        "ab".repeat(32),
        a.base_url(),
        b.base_url()
    ));
    let (p, addr, _http) = serve(&config, &[]).await;
    let f = p.terminate().await;
    assert!(f.status.success(), "{f:?}");
    // The address stays a line of its own on stdout: scripts read it.
    assert!(
        f.stdout
            .lines()
            .any(|l| l == format!("listening on http://{addr}")),
        "{f:?}"
    );
    let stderr = strip_ansi(&f.stderr);
    let started: Vec<&str> = stderr.lines().filter(|l| l.contains(" started ")).collect();
    assert_eq!(started.len(), 1, "one start-up line: {stderr}");
    let line = started[0];
    for want in [
        " INFO ".to_owned(),
        format!("listen={addr}"),
        "agents=2 (scripts, summaries)".to_owned(),
        "store=in-process".to_owned(),
        "tls=\"off\"".to_owned(),
        "clients=1".to_owned(),
        format!("config={}", path_of(&config)),
    ] {
        assert!(line.contains(&want), "{want} in {line}");
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
