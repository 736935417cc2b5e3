//! `a2a-gateway demo`: the gateway on the in-process store in front of three sample agents on
//! loopback (two Clawpedia agents and one official A2A 1.0 agent), a finished sample task of
//! each protocol, and curl commands that work as printed.
//! `a2a-gateway sample-agent`: one sample agent on its own, for load runs and experiments.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use a2a_gateway::config::{AgentConfig, ClientConfig, Config, Protocol, Right, Secret};
use a2a_gateway::{Gateway, Signals};
use a2a_sample_agent::{card_for, AgentOptions, NewArtifact, Progress, SampleAgent};

/// The protocol a sample agent speaks (`sample-agent --protocol`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AgentProtocol {
    /// Clawpedia A2A 1.0 (the REST task protocol with schemas on the card).
    Clawpedia,
    /// The official A2A protocol: JSON-RPC and HTTP+JSON.
    A2a,
}

/// The official A2A version a standalone sample agent speaks (`--a2a-version`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AgentVersion {
    /// A2A 1.0.
    #[value(name = "1.0")]
    V1_0,
    /// A2A 0.3: a 0.3 card, 0.3's methods and shapes.
    #[value(name = "0.3")]
    V0_3,
}
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use crate::announce;

fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    s.parse()
        .map_err(|_| format!("{s:?} is not an IP:port address"))
}

async fn start_agent(name: &str, description: &str) -> Result<SampleAgent, String> {
    let mut card = card_for(name, None);
    card["description"] = json!(description);
    let opts = AgentOptions {
        card,
        progress: Some(Progress::default()),
        ..AgentOptions::default()
    };
    SampleAgent::start(opts)
        .await
        .map_err(|e| format!("cannot start the sample agent {name:?}: {e}"))
}

/// The demo's one client (with `--key`): every right, every agent.
fn operator(key: &str) -> ClientConfig {
    use sha2::{Digest, Sha256};
    let hex: String = Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    ClientConfig {
        name: "operator".into(),
        key_sha256: Some(hex),
        agents: vec!["*".into()],
        can: Right::ALL.to_vec(),
        ..ClientConfig::default()
    }
}

/// A shell word: `s` in single quotes.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

pub async fn demo(listen: String, key: Option<String>) -> Result<(), String> {
    let listen = parse_addr(&listen)?;
    let scripts = start_agent(
        "Python Script Generator",
        "Generates a Python script based on a given topic and saves it as an artifact.",
    )
    .await?;
    let summaries = start_agent(
        "Script Summarizer",
        "Writes a short script and a summary of it for a given topic.",
    )
    .await?;
    let echo = SampleAgent::start(AgentOptions {
        progress: Some(Progress::default()),
        ..AgentOptions::a2a("Echo")
    })
    .await
    .map_err(|e| format!("cannot start the sample A2A agent: {e}"))?;
    // The agents may push notifications with this token (printed below, so a push can be
    // tried by hand); a new one each run.
    let ingest = format!("demo-ingest-{}", uuid::Uuid::new_v4().simple());
    let mut agents = vec![
        AgentConfig::new("scripts", &scripts.base_url()),
        AgentConfig::new("summaries", &summaries.base_url()),
    ];
    for a in &mut agents {
        a.ingest_token = Some(Secret::new(ingest.clone()));
    }
    let mut official = AgentConfig::new("echo", &echo.base_url());
    official.protocol = Protocol::A2a;
    agents.push(official);
    let mut cfg = Config::with_agents(listen, agents);
    if let Some(k) = &key {
        cfg.clients = vec![operator(k)];
    }
    let gw = Gateway::start(cfg).await.map_err(|e| e.to_string())?;
    let base = format!("http://{}", gw.addr());
    announce(&format!("listening on {base}"));
    announce(&format!(
        "sample agents: scripts at {}, summaries at {} (Clawpedia); echo at {} (official A2A)",
        scripts.base_url(),
        summaries.base_url(),
        echo.base_url()
    ));
    // With the gateway's address known, the agents' cards ask for push notifications to it,
    // as a deployed agent's would: the ledger, `/events` and the fleet page hear of every
    // change as it happens, without anyone polling the task.
    for (agent, name) in [(&scripts, "scripts"), (&summaries, "summaries")] {
        let mut card = agent.card();
        card["notification_config"] = json!({
            "endpoint_url": format!("{base}/agents/{name}/notifications"),
            "auth_header": format!("Authorization: Bearer {ingest}"),
        });
        agent.set_card(card);
    }
    let auth = key.as_deref().map(|k| format!("Bearer {k}"));
    // The gateway fetches the cards in the background: a create before an agent's card is in
    // would be answered 503 (and show as an error on the fleet page).
    let calls = Calls::new(&base, auth.as_deref());
    wait_for_cards(&calls, CARDS_WAIT).await?;
    announce("preparing a finished sample task (about 4 s)...");

    let (task, artifact_id) = sample_task(&calls).await?;
    let task_id = task["task_id"].as_str().unwrap_or_default().to_owned();
    let a2a_task = sample_a2a_task(&calls).await?;
    // The finished task, as a late push would bring it back: WORKING again, and newer.
    let mut reopened = task.clone();
    reopened["status"] = json!("WORKING");
    reopened["updated_at"] = json!(a2a_gateway::protocol::time::now());
    let late_push = json!({
        "event_type": "task.status.updated",
        "timestamp": a2a_gateway::protocol::time::now(),
        "data": reopened,
    });
    let input =
        r#"{"input":{"topic":"average of the age column of a CSV file","filename":"ages.py"}}"#;
    let agentless =
        r#"{"agent":"summaries","input":{"topic":"word count of a text file","filename":"wc.py"}}"#;
    let json_h = "-H 'Content-Type: application/json'";
    let a2a_h = "-H 'A2A-Version: 1.0'";
    let rpc = |id: u32, method: &str, params: &str| {
        format!(r#"'{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}'"#)
    };
    let hello =
        r#"{"message":{"messageId":"demo-hello","role":"ROLE_USER","parts":[{"text":"hello"}]}}"#;
    let need_input = r#"'{"message":{"messageId":"demo-need-input","role":"ROLE_USER","parts":[{"text":"need input"}]}}'"#;
    // With --key, every command sends it (the stream as well: curl can set the header).
    let h = auth
        .as_deref()
        .map(|a| format!(" -H {}", quoted(&format!("Authorization: {a}"))))
        .unwrap_or_default();
    let ui = match &key {
        Some(_) => format!("{base}/ui  (it asks for the key given with --key)"),
        None => format!("{base}/ui"),
    };
    let lines = [
        String::new(),
        format!("The fleet page, live: {ui}"),
        String::new(),
        "Try these (each works as printed):".into(),
        String::new(),
        "# the agents and their cards".into(),
        format!("curl -s{h} {base}/agents"),
        format!("curl -s{h} {base}/agents/scripts/agent-card.json"),
        "# create a task (202, SUBMITTED); the input is validated against the card first".into(),
        format!("curl -s{h} -X POST {base}/agents/scripts/tasks {json_h} -d '{input}'"),
        "# the same without naming the route: the gateway finds the agent".into(),
        format!("curl -s{h} -X POST {base}/tasks {json_h} -d '{agentless}'"),
        "# an input the card refuses: 422 with every violation, the agent never sees it".into(),
        format!("curl -s{h} -X POST {base}/agents/scripts/tasks {json_h} -d '{{\"input\":{{\"topic\":7,\"filename\":\"x.sh\"}}}}'"),
        "# create a task and watch it work (log and artifact events), for 6 s".into(),
        format!("id=$(curl -s{h} -X POST {base}/agents/scripts/tasks {json_h} -d '{input}' | sed -E 's/.*\"task_id\":\"([^\"]+)\".*/\\1/'); curl -sN{h} --max-time 6 {base}/tasks/$id/stream; echo"),
        "# the finished sample task, its artifacts, and the generated script".into(),
        format!("curl -s{h} {base}/tasks/{task_id}"),
        format!("curl -s{h} {base}/tasks/{task_id}/artifacts"),
        format!("curl -s{h} {base}/artifacts/{artifact_id}/content"),
        "# a finished task cannot be cancelled: 409 TASK_TERMINAL".into(),
        format!("curl -s{h} -X POST {base}/tasks/{task_id}/cancel"),
        "# an agent's late push that would reopen it: refused (409), and on /ui's live feed".into(),
        format!(
            "curl -s -X POST {base}/agents/scripts/notifications -H 'Authorization: Bearer {ingest}' {json_h} -d {}",
            quoted(&late_push.to_string())
        ),
        "# the official A2A agent: its card as the gateway serves it (what a2a-sdk and @a2a-js/sdk start from)".into(),
        format!("curl -s{h} {base}/agents/echo/.well-known/agent-card.json"),
        "# SendMessage over JSON-RPC: COMPLETED, with an echo artifact (the same messageId again is answered once)".into(),
        format!("curl -s{h} -X POST {base}/agents/echo/jsonrpc {json_h} {a2a_h} -d {}", rpc(1, "SendMessage", hello)),
        "# the same agent over HTTP+JSON: a task that asks for input (INPUT_REQUIRED)".into(),
        format!("curl -s{h} -X POST {base}/agents/echo/message:send -H 'Content-Type: application/a2a+json' {a2a_h} -d {need_input}"),
        "# the finished A2A sample task, from the ledger".into(),
        format!("curl -s{h} {base}/agents/echo/tasks/{a2a_task} {a2a_h}"),
        "# ListTasks, from the ledger: the caller's tasks, newest first (REST, and JSON-RPC at /a2a for the whole fleet)".into(),
        format!("curl -s{h} '{base}/agents/echo/tasks?pageSize=5' {a2a_h}"),
        format!("curl -s{h} -X POST {base}/a2a {json_h} {a2a_h} -d {}", rpc(2, "ListTasks", r#"{"pageSize":5}"#)),
        "# every task of both protocols, each status in its own protocol's words".into(),
        format!("curl -s{h} '{base}/tasks?page_size=10'"),
        "# metrics".into(),
        format!("curl -s{h} {base}/metrics | grep ^a2a_gateway_requests_total"),
        String::new(),
        "Ctrl-C stops the demo.".into(),
    ];
    let signals = Signals::register();
    announce(&lines.join("\n"));
    gw.run_until_signal(signals).await;
    drop((scripts, summaries, echo));
    Ok(())
}

/// How long the demo waits for the gateway to have every sample agent's card.
const CARDS_WAIT: Duration = Duration::from_secs(20);

/// The demo's own calls to its gateway: JSON in and out, with the demo's key when it has one.
struct Calls<'a> {
    client: Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
    base: &'a str,
    auth: Option<&'a str>,
}

impl<'a> Calls<'a> {
    fn new(base: &'a str, auth: Option<&'a str>) -> Calls<'a> {
        Calls {
            client: Client::builder(TokioExecutor::new()).build_http(),
            base,
            auth,
        }
    }

    /// `method path` (with `headers` and a JSON `body`, if any): the answer's status and JSON
    /// (`null` when it is not JSON), or why there was none.
    async fn call(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<(hyper::StatusCode, Value), String> {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("content-type", "application/json");
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        if let Some(a) = self.auth {
            req = req.header("authorization", a);
        }
        let req = req
            .body(Full::new(
                body.map(|b| Bytes::from(b.to_string())).unwrap_or_default(),
            ))
            .map_err(|e| e.to_string())?;
        let res = self
            .client
            .request(req)
            .await
            .map_err(|e| format!("{method} {path}: {e}"))?;
        let status = res.status();
        let raw = res
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("{method} {path}: {e}"))?
            .to_bytes();
        Ok((status, serde_json::from_slice(&raw).unwrap_or(Value::Null)))
    }

    /// [`Calls::call`] that must succeed: its JSON, or the status and body as the error.
    async fn ok(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, String> {
        match self.call(method, path, &[], body).await? {
            (status, v) if status.is_success() => Ok(v),
            (status, v) => Err(format!("{method} {path} answered {status}: {v}")),
        }
    }
}

/// Wait until the gateway reports a card for every agent (`GET /agents`: each `card_state` is
/// `fresh`), asking every 100 ms for at most `limit`; past it, an error naming each agent still
/// without one and why.
async fn wait_for_cards(calls: &Calls<'_>, limit: Duration) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    loop {
        let missing = match calls.ok("GET", "/agents", None).await {
            Ok(v) => v["agents"]
                .as_array()
                .map(|agents| {
                    agents
                        .iter()
                        .filter(|a| a["card_state"] != "fresh")
                        .map(|a| {
                            let why = a["last_error"].as_str().unwrap_or("not fetched yet");
                            format!(
                                "{} ({}: {why})",
                                a["name"].as_str().unwrap_or("?"),
                                a["card_state"].as_str().unwrap_or("?")
                            )
                        })
                        .collect::<Vec<_>>()
                })
                .unwrap_or_else(|| vec![format!("GET /agents answered {v}")]),
            Err(e) => vec![e],
        };
        if missing.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "the gateway did not have every sample agent's card within {} s: {}",
                limit.as_secs(),
                missing.join(", ")
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Send one message to the official A2A agent through the gateway and return the id of its
/// task, COMPLETED. Its card is in already ([`wait_for_cards`]).
async fn sample_a2a_task(calls: &Calls<'_>) -> Result<String, String> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
        "parts": [{"text": "hello"}]}}});
    let (_, v) = calls
        .call(
            "POST",
            "/agents/echo/jsonrpc",
            &[("a2a-version", "1.0")],
            Some(&body),
        )
        .await?;
    match v["result"]["task"]["id"].as_str() {
        Some(id) => Ok(id.to_owned()),
        None => Err(format!("the sample A2A message failed: {v}")),
    }
}

/// Create a task through the gateway, wait for it to finish, list its artifacts (which teaches
/// the gateway where they live) and return the finished task and the script's artifact id.
async fn sample_task(calls: &Calls<'_>) -> Result<(Value, String), String> {
    // The agent's card is in already ([`wait_for_cards`]): one create.
    let input = json!({"input": {"topic": "fizzbuzz up to 100", "filename": "fizzbuzz.py"}});
    let task = calls
        .ok("POST", "/agents/scripts/tasks", Some(&input))
        .await
        .map_err(|e| format!("sample task: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(20);
    let id = task["task_id"]
        .as_str()
        .ok_or("sample task without task_id")?
        .to_owned();
    let done = loop {
        let t = calls.ok("GET", &format!("/tasks/{id}"), None).await?;
        if t["status"] == "COMPLETED" {
            break t;
        }
        if Instant::now() > deadline {
            return Err(format!("sample task still {} after 20 s", t["status"]));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let list = calls
        .ok("GET", &format!("/tasks/{id}/artifacts"), None)
        .await?;
    let artifact = list["artifacts"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["type"] == "file"))
        .and_then(|a| a["artifact_id"].as_str())
        .ok_or("sample task has no file artifact")?
        .to_owned();
    Ok((done, artifact))
}

/// `a2a-gateway sample-agent`'s flags.
pub struct Standalone {
    /// Where the agent listens.
    pub listen: String,
    /// Whether tasks advance on their own.
    pub progress: bool,
    /// A file artifact of this many bytes to start with (0: none).
    pub file_bytes: usize,
    /// The card's `agent_id`; a new one when absent.
    pub agent_id: Option<uuid::Uuid>,
    /// Where to push status changes, and the bearer token to push with.
    pub push: Option<(String, String)>,
    /// The protocol it speaks.
    pub protocol: AgentProtocol,
    /// The official protocol's version.
    pub version: AgentVersion,
}

pub async fn sample_agent(run: Standalone) -> Result<(), String> {
    let Standalone {
        listen,
        progress,
        file_bytes,
        agent_id,
        push,
        protocol,
        version,
    } = run;
    if version == AgentVersion::V0_3 && protocol != AgentProtocol::A2a {
        return Err("--a2a-version is the official protocol's: give --protocol a2a".into());
    }
    if protocol == AgentProtocol::A2a {
        if file_bytes > 0 || agent_id.is_some() || push.is_some() {
            return Err(
                "--file-bytes, --agent-id and --push are the Clawpedia agent's: not with --protocol a2a"
                    .into(),
            );
        }
        let base = match version {
            AgentVersion::V1_0 => AgentOptions::a2a("Sample A2A Agent"),
            AgentVersion::V0_3 => AgentOptions::a2a_v0_3("Sample A2A 0.3 Agent"),
        };
        let opts = AgentOptions {
            listen: parse_addr(&listen)?,
            progress: progress.then(Progress::default),
            record_capacity: 0,
            ..base
        };
        let agent = SampleAgent::start(opts).await.map_err(|e| e.to_string())?;
        let rest = match version {
            AgentVersion::V1_0 => "/a2a/rest",
            AgentVersion::V0_3 => "/a2a/rest/v1",
        };
        announce(&format!(
            "sample A2A {} agent listening on {} (card {}{}, JSON-RPC /a2a/jsonrpc, HTTP+JSON {rest})",
            match version {
                AgentVersion::V1_0 => "1.0",
                AgentVersion::V0_3 => "0.3",
            },
            agent.base_url(),
            agent.base_url(),
            a2a_sample_agent::A2A_CARD_PATH
        ));
        let _ = tokio::signal::ctrl_c().await;
        agent.shutdown().await;
        return Ok(());
    }
    let auth = push
        .as_ref()
        .map(|(url, token)| (url.clone(), format!("Authorization: Bearer {token}")));
    let mut card = card_for(
        "Sample Agent",
        auth.as_ref().map(|(u, a)| (u.as_str(), a.as_str())),
    );
    if let Some(id) = agent_id {
        card["agent_id"] = json!(id.to_string());
    }
    let opts = AgentOptions {
        listen: parse_addr(&listen)?,
        card,
        progress: progress.then(Progress::default),
        // Load runs: keep no request log, it would clone every request.
        record_capacity: 0,
        ..AgentOptions::default()
    };
    let agent = SampleAgent::start(opts).await.map_err(|e| e.to_string())?;
    announce(&format!("sample agent listening on {}", agent.base_url()));
    if file_bytes > 0 {
        let task = agent.create_task(json!({"topic": "download", "filename": "data.bin"}));
        let artifact = agent.add_artifact(
            &task,
            NewArtifact::File {
                filename: "data.bin".into(),
                mime_type: "application/octet-stream".into(),
                body: Bytes::from(vec![b'x'; file_bytes]),
            },
        );
        announce(&format!("file artifact: /artifacts/{artifact}/content"));
    }
    let _ = tokio::signal::ctrl_c().await;
    agent.shutdown().await;
    Ok(())
}
