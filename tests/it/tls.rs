//! TLS in and out, with a CA each test makes (rcgen): HTTP/1.1 and HTTP/2 chosen by ALPN, a
//! task stream over TLS; client certificates required (none, or one from another CA, refused at
//! the handshake; a good one is its client by `cert_subject`, with no bearer) and optional;
//! certificates rotated under traffic with no failed request; an https agent trusted through
//! its own `ca_file` (and only that agent); and `check-config` naming broken TLS files.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use hyper::Method;
use rcgen::DnType;
use serde_json::Value;

use a2a_gateway::config::{AgentConfig, ClientAuth, ClientConfig, Config, Right, TlsConfig};
use a2a_gateway::Gateway;

use crate::support::sse::Events;
use crate::support::tls::{client_config, connect, peer_certificate, terminator, Ca, Files, Leaf};
use crate::support::*;

const WAIT: Duration = Duration::from_secs(10);
const H2: &[u8] = b"h2";
const H1: &[u8] = b"http/1.1";
const BOTH: &[&[u8]] = &[H2, H1];

/// A gateway serving HTTPS with `tls` in front of `agents`, with `tweak` applied; its client
/// trusts `ca`, presents no certificate and offers h2 and http/1.1.
async fn start(
    agents: &[(&str, &sample::SampleAgent)],
    ca: &Ca,
    tls: TlsConfig,
    tweak: impl FnOnce(&mut Config),
) -> TestGateway {
    let mut g = TestGateway::start(agents, |cfg| {
        cfg.tls = Some(tls);
        tweak(cfg);
    })
    .await;
    assert!(g.gw.is_tls());
    g.http = Http::tls(https(&g.gw), client_config(ca, None, BOTH));
    g
}

/// A gateway in front of agent `a` that verifies client certificates against `ca` (`auth`),
/// with three clients: `orchestrator-a` (`CN=orchestrator-a,O=Example`; tasks, streams) and
/// `orchestrator-b` (`CN=orchestrator-b`; tasks) by certificate, `keyed` by bearer key.
async fn mtls(a: &sample::SampleAgent, ca: &Ca, files: &Files, auth: ClientAuth) -> TestGateway {
    let tls = files.tls("server", &ca.server(), Some((ca, auth)));
    start(&[("a", a)], ca, tls, |cfg| {
        cfg.clients = vec![
            cert_client(
                "orchestrator-a",
                "CN=orchestrator-a,O=Example",
                &[Right::Tasks, Right::Streams],
            ),
            cert_client("orchestrator-b", "CN=orchestrator-b", &[Right::Tasks]),
            crate::auth::client("keyed", KEYED, &["*"], &[Right::Tasks]),
        ];
    })
    .await
}

const KEYED: &str = "keyed-key-0123456789abcdef";

/// `orchestrator-a`'s subject, first RDN first.
const ALICE: &[(DnType, &str)] = &[
    (DnType::OrganizationName, "Example"),
    (DnType::CommonName, "orchestrator-a"),
];

/// A CA, and a ready gateway serving HTTPS with a certificate it signed (no client
/// certificates) in front of one agent, `a`; the files live as long as the first.
async fn https_gateway(
    tweak: impl FnOnce(&mut Config),
) -> (Ca, Files, sample::SampleAgent, TestGateway) {
    let ca = Ca::new("test CA");
    let files = Files::new();
    let a = agent().await;
    let g = start(
        &[("a", &a)],
        &ca,
        files.tls("server", &ca.server(), None),
        tweak,
    )
    .await;
    g.ready().await;
    (ca, files, a, g)
}

fn https(gw: &Gateway) -> String {
    format!("https://{}", gw.addr())
}

/// A client of `g` with its own TLS settings.
fn client(g: &TestGateway, ca: &Ca, identity: Option<&Leaf>, alpn: &[&[u8]]) -> Http {
    Http::tls(https(&g.gw), client_config(ca, identity, alpn))
}

/// A client whose only credential is its certificate.
fn cert_client(name: &str, subject: &str, can: &[Right]) -> ClientConfig {
    ClientConfig {
        name: name.into(),
        cert_subject: Some(subject.into()),
        can: can.to_vec(),
        ..ClientConfig::default()
    }
}

fn task_body() -> Value {
    serde_json::json!({ "input": good_input() })
}

/// One series of a family with one label.
fn count(family: &prometheus::IntCounterVec, label: &str) -> u64 {
    family.with_label_values(&[label]).get()
}

fn handshakes(g: &TestGateway, result: &str) -> u64 {
    count(&g.gw.metrics().tls_handshakes, result)
}

fn auth_failures(g: &TestGateway, reason: &str) -> u64 {
    count(&g.gw.metrics().auth_failures, reason)
}

#[tokio::test]
async fn http1_and_http2_are_chosen_by_alpn_and_agents_hear_https() {
    let (ca, _files, a, g) = https_gateway(|_| {}).await;

    for (alpn, version) in [
        (BOTH, hyper::Version::HTTP_2),
        (&[H1][..], hyper::Version::HTTP_11),
        (&[H2][..], hyper::Version::HTTP_2),
    ] {
        let http = client(&g, &ca, None, alpn);
        let r = http.post_json("/agents/a/tasks", &task_body()).await;
        assert_eq!((r.status, r.version), (202, version), "{alpn:?}: {r:?}");
        let id = r.json()["task_id"].as_str().expect("task id").to_owned();
        let r = http.get(&format!("/tasks/{id}")).await;
        assert_eq!((r.status, r.version), (200, version), "{r:?}");
    }
    // The agent is told the client came over TLS.
    let created = a
        .requests()
        .into_iter()
        .find(|r| r.route == sample::Route::CreateTask)
        .expect("a create reached the agent");
    assert_eq!(created.headers["x-forwarded-proto"], "https");
    assert!(handshakes(&g, "ok") >= 3);

    // Plaintext on the TLS port gets no HTTP answer, and costs nothing but a failed handshake.
    let failed = handshakes(&g, "failed");
    let plain = Http::new(format!("http://{}", g.gw.addr()));
    assert!(plain
        .try_send(Method::GET, "/healthz", &[], Bytes::new())
        .await
        .is_err());
    wait_for("the failed handshake counted", || async {
        handshakes(&g, "failed") > failed
    })
    .await;
}

#[tokio::test]
async fn a_task_stream_over_tls_on_http1_and_http2() {
    let (ca, _files, a, g) = https_gateway(ingest).await;
    let id = g.create_task("a").await;
    let path = format!("/agents/a/tasks/{id}/stream");
    // An EventSource's request on HTTP/1.1 (the lean path's on plaintext; hyper's here), and
    // one on HTTP/2.
    let mut h1 = Events::new(client(&g, &ca, None, &[H1]).open(&path).await);
    let mut h2 = Events::new(client(&g, &ca, None, &[H2]).open(&path).await);
    wait_for("one upstream", || {
        let open = a.stream_connections(&id);
        async move { open == 1 }
    })
    .await;
    a.push_event(&id, "log", "{\"n\":1}");
    for s in [&mut h1, &mut h2] {
        let e = s.next_event(WAIT).await.expect("an event");
        assert_eq!((e.event.as_str(), e.data.as_str()), ("log", "{\"n\":1}"));
    }
    let done = moved(&a, &id, "COMPLETED");
    assert_eq!(g.push(&done).await.status, 202);
    for s in [&mut h1, &mut h2] {
        let e = s.next_event(WAIT).await.expect("the final event");
        assert_eq!(e.event, "status");
        assert!(s.until_end(WAIT).await, "the stream ends");
        assert!(!s.failed, "{}", s.raw);
    }
}

#[tokio::test]
async fn required_client_certificates_refuse_at_the_handshake_and_name_their_client() {
    let ca = Ca::new("client CA");
    let stranger_ca = Ca::new("another CA");
    let files = Files::new();
    let a = agent().await;
    let g = mtls(&a, &ca, &files, ClientAuth::Required).await;
    let alice = ca.client(ALICE);
    let bob = ca.client(&[(DnType::CommonName, "orchestrator-b")]);
    let nobody = ca.client(&[(DnType::CommonName, "nobody")]);
    let forged = stranger_ca.client(ALICE);

    // No certificate, or one from another CA: no connection, not even for a probe.
    for (what, identity) in [("no certificate", None), ("another CA's", Some(&forged))] {
        let failed = handshakes(&g, "failed");
        let r = client(&g, &ca, identity, BOTH)
            .try_send(Method::GET, "/healthz", &[], Bytes::new())
            .await;
        assert!(r.is_err(), "{what}: {r:?}");
        wait_for("the refused handshake counted", || async {
            handshakes(&g, "failed") > failed
        })
        .await;
    }

    // A good certificate is its client, with no bearer at all: it creates, and owns, tasks.
    let as_alice = client(&g, &ca, Some(&alice), BOTH);
    as_alice.ready().await;
    let r = as_alice.post_json("/agents/a/tasks", &task_body()).await;
    assert_eq!(r.status, 202, "{r:?}");
    let id = r.json()["task_id"].as_str().expect("task id").to_owned();
    assert_eq!(as_alice.get(&format!("/tasks/{id}")).await.status, 200);
    let requests =
        g.gw.metrics()
            .requests
            .with_label_values(&["create_task", "a", "orchestrator-a", "202"]);
    assert_eq!(requests.get(), 1);
    // Another client's certificate: another client, which does not see alice's task.
    let as_bob = client(&g, &ca, Some(&bob), BOTH);
    let r = as_bob.get(&format!("/tasks/{id}")).await;
    assert_eq!((r.status, r.error_code().as_str()), (404, "TASK_NOT_FOUND"));
    // A certificate from the CA whose subject names no client: 401, like a wrong key.
    let invalid = auth_failures(&g, "invalid");
    let r = client(&g, &ca, Some(&nobody), BOTH)
        .post_json("/agents/a/tasks", &task_body())
        .await;
    assert_eq!((r.status, r.error_code().as_str()), (401, "UNAUTHORIZED"));
    assert!(r.header("www-authenticate").is_some());
    assert_eq!(auth_failures(&g, "invalid"), invalid + 1);
    // A bearer credential comes first: a wrong one is refused despite the good certificate,
    // and a good one is its own client.
    let r = as_alice
        .send(
            Method::GET,
            &format!("/tasks/{id}"),
            &[("authorization", "Bearer wrong-key-0123456789")],
            Bytes::new(),
        )
        .await;
    assert_eq!(r.status, 401, "{r:?}");
    let r = as_alice
        .send(
            Method::GET,
            &format!("/tasks/{id}"),
            &[("authorization", &format!("Bearer {KEYED}"))],
            Bytes::new(),
        )
        .await;
    assert_eq!(r.status, 404, "keyed does not own alice's task: {r:?}");
}

fn handshake_failures(g: &TestGateway, reason: &str) -> u64 {
    count(&g.gw.metrics().tls_handshake_failures, reason)
}

#[tokio::test]
async fn handshake_failures_are_counted_by_reason_and_tls_connections_are_open() {
    let ca = Ca::new("client CA");
    let stranger_ca = Ca::new("another CA");
    let files = Files::new();
    let a = agent().await;
    let g = mtls(&a, &ca, &files, ClientAuth::Required).await;
    let alice = ca.client(ALICE);
    let forged = stranger_ca.client(ALICE);
    let addr = g.gw.addr();

    let tries: [(&str, rustls::ClientConfig); 4] = [
        ("no_client_certificate", client_config(&ca, None, BOTH)),
        (
            "bad_client_certificate",
            client_config(&ca, Some(&forged), BOTH),
        ),
        // A client that does not trust the server's certificate aborts with an alert.
        ("alert", client_config(&stranger_ca, Some(&alice), BOTH)),
        // No protocol in common: the server offers h2 and http/1.1 only.
        ("incompatible", client_config(&ca, Some(&alice), &[b"h3"])),
    ];
    for (reason, config) in tries {
        let before = handshake_failures(&g, reason);
        // Whether the client notices at once (TLS 1.3 sends the client's certificate last),
        // the gateway refuses the connection and names why.
        if let Ok(mut s) = connect(addr, config).await {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let _ = s
                .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
                .await;
            let mut buf = [0u8; 64];
            let read = tokio::time::timeout(WAIT, s.read(&mut buf)).await;
            assert!(
                !matches!(read, Ok(Ok(n)) if n > 0),
                "{reason}: the gateway answered"
            );
        }
        wait_for(
            &format!("a handshake failure counted as {reason}"),
            || async { handshake_failures(&g, reason) > before },
        )
        .await;
    }
    // Plaintext on the TLS port.
    let before = handshake_failures(&g, "not_tls");
    let plain = Http::new(format!("http://{addr}"));
    assert!(plain
        .try_send(Method::GET, "/healthz", &[], Bytes::new())
        .await
        .is_err());
    wait_for("plaintext counted as not_tls", || async {
        handshake_failures(&g, "not_tls") > before
    })
    .await;
    // Each failure is also a failed handshake, as before.
    assert!(handshakes(&g, "failed") >= 5);

    // A TLS connection held open is counted under transport="tls" until it closes.
    let open = |g: &TestGateway| {
        let text = String::from_utf8(g.gw.metrics().encode()).expect("UTF-8");
        metric_value(
            &text,
            "a2a_gateway_connections_open",
            &[("transport", "tls")],
        )
    };
    wait_for("the refused connections closed", || async {
        open(&g) == 0.0
    })
    .await;
    let held = connect(addr, client_config(&ca, Some(&alice), BOTH))
        .await
        .expect("a good handshake");
    wait_for("one TLS connection open", || async { open(&g) == 1.0 }).await;
    drop(held);
    wait_for("none open", || async { open(&g) == 0.0 }).await;
}

#[tokio::test]
async fn optional_client_certificates_leave_probes_open_and_bearers_working() {
    let ca = Ca::new("client CA");
    let files = Files::new();
    let a = agent().await;
    let g = mtls(&a, &ca, &files, ClientAuth::Optional).await;
    // Without a certificate: the probes answer, a task route needs credentials.
    g.ready().await;
    assert_eq!(g.http.get("/healthz").await.status, 200);
    let missing = auth_failures(&g, "missing");
    let r = g.http.post_json("/agents/a/tasks", &task_body()).await;
    assert_eq!((r.status, r.error_code().as_str()), (401, "UNAUTHORIZED"));
    assert_eq!(auth_failures(&g, "missing"), missing + 1);
    // A bearer without a certificate is its client.
    let r = g
        .http
        .post_json_as("/agents/a/tasks", KEYED, &task_body(), &[])
        .await;
    assert_eq!(r.status, 202, "{r:?}");
    // A certificate is its client.
    let as_alice = client(&g, &ca, Some(&ca.client(ALICE)), BOTH);
    let r = as_alice.post_json("/agents/a/tasks", &task_body()).await;
    assert_eq!(r.status, 202, "{r:?}");
    let id = r.json()["task_id"].as_str().expect("task id").to_owned();
    assert_eq!(as_alice.get(&format!("/tasks/{id}")).await.status, 200);
    // A certificate that does not verify is still refused, optional or not.
    let forged = Ca::new("another CA").client(ALICE);
    let r = client(&g, &ca, Some(&forged), BOTH)
        .try_send(Method::GET, "/healthz", &[], Bytes::new())
        .await;
    assert!(r.is_err(), "{r:?}");
}

#[tokio::test]
async fn certificates_rotate_under_traffic_without_a_failed_request() {
    let ca = Ca::new("rotation CA");
    let files = Files::new();
    let a = agent().await;
    let (first, second) = (ca.server(), ca.server());
    let first_cfg = files.tls("first", &first, None);
    let second_cfg = files.tls("second", &second, None);
    let g = start(&[("a", &a)], &ca, first_cfg.clone(), |_| {}).await;
    g.ready().await;
    let addr = g.gw.addr();
    let h1 = || client_config(&ca, None, &[H1]);

    // A connection opened before any rotation, kept open throughout.
    let old = connect(addr, h1()).await.expect("TLS connection");
    assert_eq!(peer_certificate(&old), first.der);
    let (mut old_conn, driver) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(old))
            .await
            .expect("HTTP/1.1 on it");
    tokio::spawn(driver);
    let healthz = || {
        hyper::Request::get("/healthz")
            .header("host", "127.0.0.1")
            .body(http_body_util::Full::new(Bytes::new()))
            .expect("request")
    };
    let r = old_conn.send_request(healthz()).await.expect("answered");
    assert_eq!(r.status(), 200);

    // Traffic: every request on a new connection, so every one is a handshake.
    let fresh = Http::tls_pooled(https(&g.gw), client_config(&ca, None, BOTH), 0);
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let traffic = {
        let (stop, ok, failures) = (stop.clone(), ok.clone(), failures.clone());
        tokio::spawn(async move {
            // Bounded: the test stops it, and it never runs past 20,000 requests.
            for _ in 0..20_000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                match fresh
                    .try_send(Method::GET, "/agents", &[], Bytes::new())
                    .await
                {
                    Ok(r) if r.status == 200 => {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(r) => failures.lock().expect("lock").push(format!("{r:?}")),
                    Err(e) => failures.lock().expect("lock").push(e),
                }
            }
        })
    };
    let served = |n: usize| {
        let ok = ok.clone();
        async move {
            let from = ok.load(Ordering::Relaxed);
            wait_for("requests served after the change", || {
                let now = ok.load(Ordering::Relaxed);
                async move { now >= from + n }
            })
            .await;
        }
    };
    served(10).await;
    for (cfg, leaf) in [
        (&second_cfg, &second),
        (&first_cfg, &first),
        (&second_cfg, &second),
    ] {
        // The whole reload a SIGHUP makes (the certificate files read again), not only TLS.
        let next = Config {
            tls: Some(cfg.clone()),
            ..(*g.gw.config()).clone()
        };
        g.gw.reload(next).await.expect("the reload is applied");
        // A new connection gets the new certificate.
        let tls = connect(addr, h1()).await.expect("TLS connection");
        assert_eq!(peer_certificate(&tls), leaf.der);
        served(20).await;
    }
    // A broken pair is refused, and the current certificate keeps serving.
    let broken = TlsConfig {
        key_file: first_cfg.key_file.clone(),
        ..second_cfg.clone()
    };
    let next = Config {
        tls: Some(broken),
        ..(*g.gw.config()).clone()
    };
    let e = g.gw.reload(next).await.expect_err("a mismatched key");
    assert!(e.to_string().contains("is not the private key"), "{e}");
    let tls = connect(addr, h1()).await.expect("TLS connection");
    assert_eq!(peer_certificate(&tls), second.der);
    served(10).await;

    stop.store(true, Ordering::Relaxed);
    traffic.await.expect("traffic loop");
    let failures = std::mem::take(&mut *failures.lock().expect("lock"));
    assert!(failures.is_empty(), "failed requests: {failures:?}");
    let served = ok.load(Ordering::Relaxed);
    assert!(served >= 80);
    // Each of them was a handshake of its own.
    assert!(handshakes(&g, "ok") as usize >= served, "{served} requests");
    // The connection opened before the rotations still works, on its first certificate.
    let r = old_conn.send_request(healthz()).await.expect("answered");
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn a_plaintext_gateway_refuses_a_tls_reload() {
    let (_a, g) = single("a", |_| {}).await;
    assert!(!g.gw.is_tls());
    let ca = Ca::new("test CA");
    let files = Files::new();
    let e =
        g.gw.reload_tls(&files.tls("server", &ca.server(), None))
            .expect_err("needs a restart");
    assert!(e.to_string().contains("restart"), "{e}");
}

#[tokio::test]
async fn an_https_agent_is_trusted_through_its_own_ca_file_and_no_other_is() {
    let agent_ca = Ca::new("agents' private CA");
    let files = Files::new();
    let ca_file = files.write("agent-ca.pem", &agent_ca.pem());
    let (secure, untrusted, plain) = (agent().await, agent().await, agent().await);
    let secure_addr = terminator(&agent_ca.server(), secure.addr()).await;
    let untrusted_addr = terminator(&agent_ca.server(), untrusted.addr()).await;
    let cfgs = vec![
        AgentConfig {
            ca_file: Some(ca_file),
            ..AgentConfig::new("secure", &format!("https://{secure_addr}"))
        },
        // The same private CA, but this agent does not name it: the system roots only.
        AgentConfig::new("untrusted", &format!("https://{untrusted_addr}")),
        AgentConfig::new("plain", &plain.base_url()),
    ];
    let cfg = Config::with_agents("127.0.0.1:0".parse().expect("addr"), cfgs);
    let gw = Gateway::start(cfg).await.expect("gateway starts");
    let http = Http::new(format!("http://{}", gw.addr()));
    http.ready().await;

    let catalog = http.get("/agents").await.json();
    let state = |name: &str| {
        catalog["agents"]
            .as_array()
            .and_then(|l| l.iter().find(|a| a["name"] == name))
            .map(|a| a["card_state"].clone())
            .unwrap_or_else(|| panic!("{name} in {catalog}"))
    };
    assert_eq!(state("secure"), "fresh");
    assert_eq!(state("plain"), "fresh");
    assert_eq!(state("untrusted"), "unavailable");

    let id = http.create_task("secure").await;
    assert!(
        secure.task(&id).is_some(),
        "the task reached the agent over TLS"
    );
    assert_eq!(http.get(&format!("/tasks/{id}")).await.status, 200);
    let r = http.post_task("untrusted").await;
    assert_eq!(
        (r.status, r.error_code().as_str()),
        (503, "AGENT_UNAVAILABLE")
    );
    http.create_task("plain").await;
    gw.shutdown().await;
}

#[tokio::test]
async fn check_config_names_the_tls_files_it_cannot_use() {
    let ca = Ca::new("test CA");
    let files = Files::new();
    let (server, other) = (ca.server(), ca.server());
    files.write("server.pem", &server.cert_pem);
    files.write("server.key", &server.key_pem);
    files.write("other.key", &other.key_pem);
    files.write("ca.pem", &ca.pem());
    files.write("junk.pem", "not a certificate");
    let check = |name: &str, text: String| {
        let path = files.write(name, &text);
        async move {
            let out = tokio::process::Command::new(bin())
                .args(["check-config", "--config", &path])
                .output()
                .await
                .expect("check-config runs");
            let text = String::from_utf8_lossy(&out.stderr).into_owned()
                + &String::from_utf8_lossy(&out.stdout);
            (out.status.code(), text)
        }
    };
    // Paths are relative to the config file.
    let config = |cert: &str, key: &str, ca: &str, agent_ca: &str| {
        format!(
            "listen = \"127.0.0.1:0\"\n[tls]\ncert_file = \"{cert}\"\nkey_file = \"{key}\"\nclient_ca_file = \"{ca}\"\n\
             [[clients]]\nname = \"orchestrator-a\"\ncert_subject = \"CN=orchestrator-a\"\n\
             [[agents]]\nname = \"a\"\nurl = \"https://agent.internal\"\nca_file = \"{agent_ca}\"\n"
        )
    };
    // (config, its files, exit code, lines that must be there, keys that must not)
    type Case<'a> = (&'a str, [&'a str; 4], i32, &'a [&'a str], &'a [&'a str]);
    let cases: [Case; 3] = [
        (
            "good.toml",
            ["server.pem", "server.key", "ca.pem", "ca.pem"],
            0,
            &[],
            &["tls."],
        ),
        (
            "missing.toml",
            ["nope.pem", "nope.key", "ca.pem", "gone.pem"],
            1,
            &[
                "tls.cert_file: cannot read",
                "tls.key_file: cannot read",
                "agents[0].ca_file: cannot read",
            ],
            &["tls.client_ca_file"],
        ),
        (
            "mismatch.toml",
            ["server.pem", "other.key", "junk.pem", "server.key"],
            1,
            &[
                "tls.key_file: ",
                "is not the private key of the first certificate in",
                "tls.client_ca_file: ",
                "holds no PEM certificate",
                "agents[0].ca_file: ",
            ],
            &["tls.cert_file"],
        ),
    ];
    for (name, [cert, key, ca, agent_ca], code, present, absent) in cases {
        let (got, out) = check(name, config(cert, key, ca, agent_ca)).await;
        assert_eq!(got, Some(code), "{name}: {out}");
        for line in present {
            assert!(out.contains(line), "{name}: {line:?} in {out}");
        }
        for key in absent {
            assert!(!out.contains(key), "{name}: no {key:?} in {out}");
        }
    }
}

/// gRPC over TLS: ALPN `h2`, the served card's gRPC interface an `https` URL, a call answered
/// with its message and status, towards a gRPC agent over the gateway's own HTTP/2 client.
#[tokio::test(flavor = "multi_thread")]
async fn grpc_over_tls_by_alpn_h2_with_an_https_interface_in_the_card() {
    use http_body_util::{BodyExt, Full};
    let official = sample::SampleAgent::start(sample::AgentOptions::a2a("Sample"))
        .await
        .expect("agent");
    let (ca, _files, _a, g) = https_gateway(|cfg| {
        let mut o = AgentConfig::new("official", &official.base_url());
        o.protocol = a2a_gateway::config::Protocol::A2a;
        o.binding = Some(a2a_gateway::config::Binding::Grpc);
        cfg.agents.push(o);
    })
    .await;
    let card = g
        .http
        .get("/agents/official/.well-known/agent-card.json")
        .await
        .json();
    let grpc = card["supportedInterfaces"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["protocolBinding"] == "GRPC"))
        .cloned()
        .expect("a gRPC interface");
    assert_eq!(grpc["url"], https(&g.gw), "{card}");
    assert_eq!(grpc["tenant"], "official");
    let tls = connect(g.gw.addr(), client_config(&ca, None, &[H2]))
        .await
        .expect("TLS");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(H2));
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .expect("h2");
    tokio::spawn(conn);
    let rpc = a2a_grpc::rpc("SendMessage").expect("rpc");
    let msg = serde_json::json!({"tenant": "official", "message": {"messageId": "m-tls",
        "role": "ROLE_USER", "parts": [{"text": "hello"}]}});
    let body = a2a_grpc::frame::encode(&a2a_grpc::json::to_bytes(&rpc.input, &msg).expect("bytes"));
    let req = hyper::Request::post(format!("{}/lf.a2a.v1.A2AService/SendMessage", https(&g.gw)))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Full::new(body))
        .expect("request");
    let res = send.send_request(req).await.expect("an answer");
    assert_eq!(res.version(), hyper::Version::HTTP_2);
    let collected = res.into_body().collect().await.expect("a body");
    assert_eq!(collected.trailers().expect("trailers")["grpc-status"], "0");
    let data = collected.to_bytes();
    let answer = a2a_grpc::json::to_json(
        &rpc.output,
        a2a_grpc::frame::read_one(&data, 1 << 20).expect("one"),
    )
    .expect("a SendMessageResponse");
    assert_eq!(
        answer["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{answer}"
    );
    assert!(official.request_count(sample::Route::A2aGrpc) >= 1);
}
