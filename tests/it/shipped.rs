//! What the shipped files tell a user holds when the user follows them: `example-config`
//! serves an official A2A agent once that agent's `protocol` is switched, and nothing else;
//! check-config warns of Clawpedia's card path on an A2A agent; an operator sees the URL a card
//! is fetched from (and a failed fetch names it) while other clients never see an agent's
//! address; the config's comments say what the docs say (the JWT binding rule); `--help` says
//! what the binary does today.

use a2a_gateway::config::{Config, Right};
use a2a_sample_agent::{AgentOptions, SampleAgent};
use serde_json::{json, Value};

use crate::a2a_gateway::gateway;
use crate::auth::client;
use crate::support::a2a_calls::{message, rpc};
use crate::support::child::*;
use crate::support::*;

/// The example config as `example-config` prints it, with one edit a user makes to run it:
/// `listen` on a free port.
async fn example_config() -> String {
    let f = run(&["example-config"]).await;
    assert!(f.status.success(), "{f:?}");
    let text = f
        .stdout
        .replace("listen = \"127.0.0.1:8080\"", "listen = \"127.0.0.1:0\"");
    assert_ne!(text, f.stdout, "the example listens on 127.0.0.1:8080");
    text
}

#[tokio::test(flavor = "multi_thread")]
async fn example_config_serves_an_a2a_agent_once_its_protocol_is_switched() {
    let echo = SampleAgent::start(AgentOptions::a2a("Echo"))
        .await
        .expect("A2A sample agent");
    let summaries = agent().await;
    let text = example_config().await;
    // The first agent becomes the A2A sample agent: its protocol line uncommented and set, its
    // url pointed at the agent. No card_path to change: the example leaves it to the protocol.
    let switched = text
        .replacen("# protocol = \"clawpedia\"\n", "protocol = \"a2a\"\n", 1)
        .replacen(
            "url = \"http://127.0.0.1:9001\"",
            &format!("url = \"{}\"", echo.base_url()),
            1,
        )
        .replacen(
            "url = \"http://127.0.0.1:9002\"",
            &format!("url = \"{}\"", summaries.base_url()),
            1,
        );
    assert_eq!(
        switched.matches(&echo.base_url()).count()
            + switched.matches("protocol = \"a2a\"\n").count(),
        2,
        "the example's first agent has a protocol line and url 127.0.0.1:9001"
    );
    let file = temp_config(&switched);
    let checked = run(&["check-config", "--config", path_of(&file)]).await;
    assert!(checked.status.success(), "{checked:?}");
    assert!(
        !checked.stderr.contains("warning"),
        "no warning for the switched example: {checked:?}"
    );
    let (_p, _addr, http) = serve(&file, &[]).await;
    wait_for("both agents' cards", || async {
        let v = http.get("/agents").await.json();
        let fresh = |name: &str, protocol: &str| {
            v["agents"]
                .as_array()
                .and_then(|a| a.iter().find(|e| e["name"] == name))
                .is_some_and(|e| e["card_state"] == "fresh" && e["protocol"] == protocol)
        };
        fresh("scripts", "a2a") && fresh("summaries", "clawpedia")
    })
    .await;
    let v = rpc(
        &http,
        "scripts",
        None,
        "SendMessage",
        message("hello", json!({})),
    )
    .await;
    assert_eq!(
        v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{v}"
    );
    // The Clawpedia agent beside it is served as before.
    assert_eq!(http.post_task("summaries").await.status, 202);
}

#[tokio::test]
async fn check_config_warns_of_clawpedias_card_path_on_an_a2a_agent() {
    let text = "listen = \"127.0.0.1:0\"\n[[agents]]\nname = \"echo\"\nprotocol = \"a2a\"\nurl = \"http://127.0.0.1:9\"\ncard_path = \"/agent-card.json\"\n";
    let file = temp_config(text);
    let f = run(&["check-config", "--config", path_of(&file)]).await;
    assert!(f.status.success(), "a warning, not a problem: {f:?}");
    assert!(
        f.stderr.contains("warning: agents[0].card_path")
            && f.stderr.contains("/.well-known/agent-card.json"),
        "{f:?}"
    );
}

/// An agent whose card path answers a redirect, as a web server does for a path it serves
/// elsewhere: the fetch fails, and who may see what of it.
#[tokio::test(flavor = "multi_thread")]
async fn only_operators_see_where_a_card_is_fetched_from_and_a_failed_fetch_names_it() {
    use Right::*;
    let echo = SampleAgent::start(AgentOptions::a2a("Echo"))
        .await
        .expect("A2A sample agent");
    let mut wrong = crate::a2a_gateway::a2a_agent("wrong", &echo.base_url());
    wrong.card_path = "/agent-card.json".into();
    let right = crate::a2a_gateway::a2a_agent("right", &echo.base_url());
    // Port 1 on loopback: nothing listens there; the connect error is the fetch's own text.
    let dead = crate::a2a_gateway::a2a_agent("dead", "http://127.0.0.1:1");
    let (_gw, http) = gateway(vec![wrong, right, dead], |cfg: &mut Config| {
        cfg.clients = vec![
            client("alice", "alice-key-0123456789abcdef", &["*"], &[Tasks]),
            client("ops", "ops-key-0123456789abcdef0", &["*"], &[Metrics]),
        ];
    })
    .await;
    let entry = |v: &Value, name: &str| -> Value {
        v["agents"]
            .as_array()
            .and_then(|a| a.iter().find(|e| e["name"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("{name} in {v}"))
    };
    wait_for("the wrong card path's fetch to fail", || async {
        let v = http
            .get_as("/agents", "ops-key-0123456789abcdef0")
            .await
            .json();
        entry(&v, "wrong")["last_error"].is_string() && entry(&v, "dead")["last_error"].is_string()
    })
    .await;
    let ops = http
        .get_as("/agents", "ops-key-0123456789abcdef0")
        .await
        .json();
    let fetched = format!("{}/agent-card.json", echo.base_url());
    let wrong = entry(&ops, "wrong");
    assert_eq!(wrong["card_fetch_url"], fetched.as_str(), "{wrong}");
    let error = wrong["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&fetched),
        "last_error names the URL: {error}"
    );
    // card_url stays the card the gateway serves.
    assert!(
        wrong["card_url"]
            .as_str()
            .is_some_and(|u| u.ends_with("/agents/wrong/.well-known/agent-card.json")),
        "{wrong}"
    );
    assert_eq!(
        entry(&ops, "right")["card_fetch_url"],
        format!("{}/.well-known/agent-card.json", echo.base_url()).as_str()
    );
    // A client without `metrics` sees neither, nor the agent's address anywhere.
    let alice = http.get_as("/agents", "alice-key-0123456789abcdef").await;
    assert_eq!(alice.status, 200);
    let wrong = entry(&alice.json(), "wrong");
    assert!(
        wrong.get("card_fetch_url").is_none() && wrong.get("last_error").is_none(),
        "{wrong}"
    );
    let port = echo
        .base_url()
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_owned();
    let body = String::from_utf8_lossy(&alice.body);
    assert!(!body.contains(&port), "{body}");
    // An agent without a card: operators read the fetch's own error; a client that may use the
    // agent reads only the kind of failure, in every answer that says why (a call, the card).
    let detail = entry(&ops, "dead")["last_error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(detail.contains("tcp connect error"), "{detail}");
    let send = rpc(
        &http,
        "dead",
        Some("alice-key-0123456789abcdef"),
        "SendMessage",
        message("hello", json!({})),
    )
    .await;
    let card = http
        .get_as(
            "/agents/dead/.well-known/agent-card.json",
            "alice-key-0123456789abcdef",
        )
        .await;
    assert_eq!(card.status, 503, "{card:?}");
    let card = card.json();
    for said in [&send["error"]["message"], &card["error"]["message"]] {
        let said = said.as_str().unwrap_or_default();
        assert!(
            said.ends_with("has no valid card: card fetch failed: the agent could not be reached"),
            "{said}"
        );
        assert!(
            !said.contains("tcp connect") && !said.contains("127.0.0.1"),
            "{said}"
        );
    }
}

/// Normalised prose: comment markers and line breaks gone, spaces collapsed.
fn prose(text: &str) -> String {
    text.lines()
        .map(|l| l.trim_start().trim_start_matches('#').trim())
        .collect::<Vec<_>>()
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The JWT binding rule, as the config's comments and docs/security.md each state it: a token
/// is a client only through `jwt_subject`; a `sub` equal to a client's name is not that
/// client; an unbound token is `jwt:{sub}` with its claims' rights, none without them. The
/// gateway's behaviour is tests/it/jwt.rs's; this keeps the two texts from contradicting it.
#[test]
fn the_configs_comments_state_the_jwt_rule_as_the_docs_do() {
    let security = prose(&std::fs::read_to_string(repo("docs/security.md")).expect("security.md"));
    let mut configs = vec![repo("config/gateway.toml")];
    for dir in ["config/examples", "deploy"] {
        for e in std::fs::read_dir(repo(dir)).expect("dir") {
            let p = e.expect("entry").path();
            if p.extension().is_some_and(|x| x == "toml") {
                configs.push(p);
            }
        }
    }
    let rule = [
        "only through that entry's jwt_subject",
        "merely equals a client's name is not that client",
        "jwt:{sub}",
        "jwt:{name}:{sub}",
        "neither: nothing",
    ];
    for phrase in rule {
        assert!(
            security.replace('`', "").contains(phrase),
            "docs/security.md: {phrase:?}"
        );
    }
    assert!(
        !security.contains("not rate-limited"),
        "docs/security.md says token subjects are not rate-limited"
    );
    for path in configs {
        let text = prose(&std::fs::read_to_string(&path).expect("config"));
        let name = path.display();
        // The contradiction once shipped: a token's sub taking the entry of that name.
        assert!(
            !text.contains("[[clients]] entry of that name"),
            "{name} says a token's sub takes the [[clients]] entry of that name"
        );
        // Token subjects are rate-limited, per subject ([auth] token_rate_per_sec).
        assert!(
            !text.contains("not rate-limited"),
            "{name} says token subjects are not rate-limited"
        );
        if path.ends_with("config/gateway.toml") {
            for phrase in rule {
                assert!(text.contains(phrase), "{name}: {phrase:?}");
            }
        }
    }
}

#[tokio::test]
async fn help_says_what_the_binary_does_today() {
    let f = run(&["--help"]).await;
    assert!(f.status.success(), "{f:?}");
    for words in ["official A2A", "0.3", "gRPC", "three sample agents"] {
        assert!(f.stdout.contains(words), "--help: {words:?}: {}", f.stdout);
    }
    assert!(!f.stdout.contains("two sample agents"), "{}", f.stdout);
    let f = run(&["demo", "--help"]).await;
    assert!(f.status.success(), "{f:?}");
    assert!(
        f.stdout.contains("three sample agents") && f.stdout.contains("official A2A"),
        "{}",
        f.stdout
    );
    // The demo really runs as many agents as --help says: one line names them all.
    let mut p = Proc::spawn(&["demo", "--listen", "127.0.0.1:0"], &[]);
    let line = p.line_containing("sample agents:").await;
    let agents = ["scripts at", "summaries at", "echo at"];
    assert!(
        agents.iter().all(|a| line.contains(a)),
        "three agents: {line}"
    );
}
