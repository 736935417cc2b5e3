//! The command line, through the real binary run as a child process: `check-config` on the shipped
//! configs and on broken ones, serving with `--config` (address printed, proxying, SIGTERM), the
//! a clear failure when Redis is unreachable, usage errors, and that `auth_header` never reaches the process's output.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use crate::support::child::*;
use crate::support::*;
use sample::{card_for, Route};
use serde_json::json;

// --- check-config ---

#[tokio::test]
async fn check_config_accepts_the_shipped_config() {
    let path = repo("config/gateway.toml");
    let f = run(&["check-config", "--config", path.to_str().expect("path")]).await;
    assert!(f.status.success(), "{f:?}");
}

#[tokio::test]
async fn check_config_accepts_every_example_config() {
    let mut examples: Vec<PathBuf> = std::fs::read_dir(repo("config/examples"))
        .expect("config/examples")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    examples.sort();
    assert!(!examples.is_empty(), "no config/examples/*.toml");
    examples.push(repo("deploy/replica.toml"));
    for path in examples {
        let text = std::fs::read_to_string(&path).expect("example");
        let placeholders = text.matches("REPLACE-ME").count();
        let f = run(&["check-config", "--config", path.to_str().expect("path")]).await;
        if placeholders == 0 {
            assert!(f.status.success(), "{}: {f:?}", path.display());
            continue;
        }
        // An example with placeholders is refused as shipped, at each placeholder only...
        assert!(
            !f.status.success(),
            "{} runs with its placeholders",
            path.display()
        );
        let out = f.output();
        let refused = out
            .lines()
            .filter(|l| l.contains("is a placeholder"))
            .count();
        let problems = out.lines().filter(|l| l.starts_with("  ")).count();
        assert_eq!(
            (refused, problems),
            (placeholders, placeholders),
            "{}: {out}",
            path.display()
        );
        // ...and accepted once they hold secrets of the operator's own.
        let dir = tempfile::tempdir().expect("dir");
        let filled = dir.path().join("filled.toml");
        std::fs::write(&filled, text.replace("REPLACE-ME", "k7Qx9Lw2Vb")).expect("write");
        let f = run(&["check-config", "--config", filled.to_str().expect("path")]).await;
        assert!(f.status.success(), "{} filled in: {f:?}", path.display());
    }
}

#[tokio::test]
async fn check_config_reports_every_mistake_of_the_broken_fixture_with_its_key() {
    // One key per mistake in tests/fixtures/broken.toml.
    let keys = [
        "listen",                // not an IP:port
        "colour",                // unknown key
        "agents[0].name",        // a space in it
        "agents[0].url",         // not http(s)
        "agents[0].timeout_ms",  // zero
        "agents[0].conformance", // not enforce/report
        "agents[1].card_path",   // not absolute
        "agents[2].name",        // used by agents[1]
        "agents[3].name",        // agents[1]'s, in another case
        "agents[4].name",        // shaped like a card agent_id
    ];
    let path = repo("tests/fixtures/broken.toml");
    let f = run(&["check-config", "--config", path.to_str().expect("path")]).await;
    assert!(!f.status.success(), "{f:?}");
    assert_no_panic(&f);
    let out = f.output();
    let reported: Vec<&str> = out
        .lines()
        .map(str::trim)
        .filter_map(|l| l.split_once(": ").map(|(key, _)| key))
        .filter(|key| !key.contains(' ') && !key.contains('/'))
        .collect();
    for key in keys {
        assert!(reported.contains(&key), "{key} is not reported: {out}");
    }
    for key in &reported {
        assert!(keys.contains(key), "unexpected problem at {key}: {out}");
    }
}

#[tokio::test]
async fn check_config_reports_a_missing_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("no-such-gateway.toml");
    let missing = missing.to_str().expect("path");
    let f = run(&["check-config", "--config", missing]).await;
    assert!(!f.status.success(), "{f:?}");
    assert_no_panic(&f);
    assert!(f.stderr.contains(missing), "the file is not named: {f:?}");
}

#[tokio::test]
async fn check_config_reports_invalid_toml() {
    let file = temp_config("listen = \"127.0.0.1:0\"\n[[agents]\nname = \n");
    let f = run(&["check-config", "--config", path_of(&file)]).await;
    assert!(!f.status.success(), "{f:?}");
    assert_no_panic(&f);
    assert!(f.stderr.contains("TOML"), "{f:?}");
}

#[tokio::test]
async fn check_config_without_a_file_asks_for_one() {
    let f = run(&["check-config"]).await;
    assert!(!f.status.success(), "{f:?}");
    assert_no_panic(&f);
    assert!(f.stderr.contains("--config"), "{f:?}");
}

#[tokio::test]
async fn check_config_accepts_a_redis_table() {
    let file = temp_config(
        "listen = \"127.0.0.1:0\"\n[[agents]]\nname = \"a\"\nurl = \"http://127.0.0.1:9\"\n\
         [redis]\nurl = \"redis://127.0.0.1:6379\"\n",
    );
    let f = run(&["check-config", "--config", path_of(&file)]).await;
    assert!(f.status.success(), "{f:?}");
    // A cluster over TLS with an ACL user; and the old single-tag prefix, refused.
    let file = temp_config(
        "listen = \"127.0.0.1:0\"\n[[agents]]\nname = \"a\"\nurl = \"http://127.0.0.1:9\"\n\
         [redis]\ncluster = true\nurls = [\"rediss://gw:pw-x@10.0.0.1:6379\", \"rediss://gw:pw-x@10.0.0.2:6379\"]\n\
         partitions = 32\nwait_replicas = 1\n",
    );
    let f = run(&["check-config", "--config", path_of(&file)]).await;
    assert!(f.status.success(), "{f:?}");
    assert!(
        !f.stdout.contains("pw-x") && !f.stderr.contains("pw-x"),
        "{f:?}"
    );
    let file = temp_config(
        "listen = \"127.0.0.1:0\"\n[[agents]]\nname = \"a\"\nurl = \"http://127.0.0.1:9\"\n\
         [redis]\nurl = \"redis://127.0.0.1:6379\"\nprefix = \"a2a:{gw}:\"\n",
    );
    let f = run(&["check-config", "--config", path_of(&file)]).await;
    assert!(!f.status.success(), "{f:?}");
    assert!(f.stderr.contains("redis.prefix"), "{f:?}");
    assert!(f.stderr.contains("braces"), "{f:?}");
}

// --- usage ---

#[tokio::test]
async fn no_arguments_is_an_error_with_a_usage_hint() {
    let f = run(&[]).await;
    assert!(!f.status.success(), "{f:?}");
    assert_no_panic(&f);
    assert!(f.stderr.contains("--config"), "no usage hint: {f:?}");
}

#[tokio::test]
async fn help_describes_the_commands() {
    let f = run(&["--help"]).await;
    assert!(f.status.success(), "{f:?}");
    for word in ["--config", "check-config", "demo"] {
        assert!(
            f.stdout.contains(word),
            "--help does not mention {word}: {f:?}"
        );
    }
}

// --- serving ---

#[tokio::test(flavor = "multi_thread")]
async fn serving_prints_its_address_and_proxies_to_the_agents() {
    let a = agent().await;
    let config = serving_config(&[("scripts", a.base_url())], "");
    let (_p, addr, http) = serve(&config, &[]).await;
    let sock: std::net::SocketAddr = addr.parse().expect("an IP:port address");
    assert!(sock.ip().is_loopback() && sock.port() != 0, "{addr}");
    assert_eq!(http.get("/healthz").await.status, 200);
    http.ready().await;
    let id = http.create_task("scripts").await;
    assert!(a.task(&id).is_some(), "the agent never got task {id}");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_stops_the_server_with_status_0() {
    let a = agent().await;
    let config = serving_config(&[("scripts", a.base_url())], "");
    let (p, _, http) = serve(&config, &[]).await;
    http.ready().await;
    let r = http.post_task("scripts").await;
    assert_eq!(r.status, 202, "{r:?}");
    // `http` keeps its keep-alive connection to the gateway open across the signal.
    let f = p.terminate().await;
    assert!(f.status.success(), "exit after SIGTERM: {f:?}");
    assert!(f.stdout.contains("listening on"), "{f:?}");
}

/// A client that connected and said nothing must not hold up the shutdown (it would, for the
/// whole silent-connection timeout, if the drain waited for it).
#[tokio::test]
async fn sigterm_is_not_held_up_by_a_silent_connection() {
    let a = agent().await;
    let config = serving_config(&[("scripts", a.base_url())], "");
    let (p, addr, http) = serve(&config, &[]).await;
    wait_for("healthz", || async {
        http.get("/healthz").await.status == 200
    })
    .await;
    let _silent = tokio::net::TcpStream::connect(addr).await.expect("connect");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let f = p.terminate().await;
    assert!(f.status.success(), "exit after SIGTERM: {f:?}");
}

/// A replica that starts before its Redis serves, not ready, naming Redis, refusing creates
/// with 503 and Retry-After (before any agent is called), and keeps connecting with backoff:
/// Redis up, it is ready and creates go through. Its password is never printed.
#[tokio::test]
async fn serving_starts_before_redis_and_connects_when_it_comes() {
    // A port nothing listens on yet.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let a = agent().await;
    let file = temp_config(&format!(
        "listen = \"127.0.0.1:0\"\n[[agents]]\nname = \"scripts\"\nurl = \"{}\"\n\
         [redis]\nurl = \"redis://:s3cretpw@127.0.0.1:{port}\"\n",
        a.base_url()
    ));
    let (p, _addr, http) = serve(&file, &[]).await;
    // Once the card is in, Redis is all that is missing.
    wait_for("readyz names redis alone", || async {
        let ready = http.get("/readyz").await;
        ready.status == 503 && ready.json()["missing"] == serde_json::json!(["redis"])
    })
    .await;
    let refused = http.post_task("scripts").await;
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.error_code(), "STORE_UNAVAILABLE");
    assert_eq!(refused.header("retry-after"), Some("1"), "{refused:?}");
    assert!(
        a.task_ids().is_empty(),
        "a refused create reached the agent"
    );
    // Redis comes, with the password the URL carries.
    let dir = tempfile::tempdir().expect("dir");
    let mut redis = std::process::Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(["--appendonly", "no", "--requirepass", "s3cretpw"])
        .arg("--dir")
        .arg(dir.path())
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server");
    wait_for("ready once Redis is up", || async {
        http.get("/readyz").await.status == 200
    })
    .await;
    let created = http.post_task("scripts").await;
    assert_eq!(created.status, 202, "{created:?}");
    assert_eq!(created.header("x-a2a-ledger"), None, "{created:?}");
    let f = p.terminate().await;
    let _ = redis.kill();
    let _ = redis.wait();
    assert_no_panic(&f);
    assert!(f.stderr.contains("Redis"), "no word of Redis: {f:?}");
    assert!(
        !f.stderr.contains("s3cretpw") && !f.stdout.contains("s3cretpw"),
        "{f:?}"
    );
}

#[tokio::test]
async fn serving_refuses_a_broken_config_with_its_problems() {
    let path = repo("tests/fixtures/broken.toml");
    let f = Proc::spawn(&["--config", path.to_str().expect("path")], &[])
        .finish()
        .await;
    assert!(!f.status.success(), "{f:?}");
    assert_no_panic(&f);
    assert!(f.stderr.contains("agents[0].url"), "{f:?}");
    // Start-up refuses names that collide ignoring case, or look like an agent_id.
    assert!(f.stderr.contains("agents[3].name"), "{f:?}");
    assert!(f.stderr.contains("agents[4].name"), "{f:?}");
    assert!(!f.stdout.contains("listening on"), "{f:?}");
}

// --- redaction in the process output ---

const SECRET_TOKEN: &str = "SECRET-c2VjcmV0LWZvci1sb2dz";

#[tokio::test(flavor = "multi_thread")]
async fn the_auth_header_never_reaches_the_process_output() {
    let auth = format!("Authorization: Bearer {SECRET_TOKEN}");
    // A good card with the secret, revalidated again and again.
    let good = agent().await;
    good.set_card(card_for(
        "Hooked Agent",
        Some(("http://127.0.0.1:9/hook", &auth)),
    ));
    // A card that is refused (and logged as refused) with the secret in it.
    let bad = agent().await;
    let mut card = card_for("Broken Hooked Agent", None);
    card["notification_config"] = json!({"endpoint_url": "not a uri", "auth_header": auth});
    bad.set_card(card);
    // And one whose auth_header is itself malformed.
    let worse = agent().await;
    let mut card = card_for("Worse Hooked Agent", None);
    card["notification_config"] =
        json!({"endpoint_url": "http://127.0.0.1:9/hook", "auth_header": [auth]});
    worse.set_card(card);

    let config = serving_config(
        &[
            ("good", good.base_url()),
            ("bad", bad.base_url()),
            ("worse", worse.base_url()),
        ],
        "refresh_secs = 1",
    );
    let (p, _, http) = serve(&config, &[("RUST_LOG", "debug")]).await;
    http.ready().await;
    wait_for("a revalidated card", || async {
        good.card_not_modified() >= 1
    })
    .await;
    wait_for("the broken cards refetched", || async {
        bad.request_count(Route::Card) >= 2 && worse.request_count(Route::Card) >= 2
    })
    .await;
    let r = http.post_task("good").await;
    assert_eq!(r.status, 202, "{r:?}");
    for path in [
        "/agents",
        "/readyz",
        "/metrics",
        "/agents/good/agent-card.json",
        "/agents/bad/agent-card.json",
        "/agents/worse/agent-card.json",
    ] {
        let r = http.get(path).await;
        assert!(
            !String::from_utf8_lossy(&r.body).contains(SECRET_TOKEN),
            "secret in {path}"
        );
    }
    for name in ["bad", "worse"] {
        let r = http.post_task(name).await;
        assert_eq!(r.status, 503, "{r:?}");
    }
    let f = p.terminate().await;
    assert!(f.status.success(), "{f:?}");
    // The logs were really captured, at debug level, including the refused cards.
    let output = strip_ansi(&f.output());
    assert!(output.contains("DEBUG"), "no debug output: {output}");
    for name in ["bad", "worse"] {
        assert!(
            output.lines().any(|l| l.contains("agent card fetch failed")
                && l.contains(&format!("agent=\"{name}\""))),
            "the refused card of {name} was not logged: {output}"
        );
    }
    assert!(
        !output.contains(SECRET_TOKEN),
        "the secret reached the process output:\n{output}"
    );
}
