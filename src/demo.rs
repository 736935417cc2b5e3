//! `a2a-gateway demo`: the gateway on the in-process store in front of two sample agents on
//! loopback, one finished sample task, and curl commands that work as printed.
//! `a2a-gateway sample-agent`: one sample agent on its own, for load runs and experiments.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use a2a_gateway::config::{AgentConfig, Config};
use a2a_gateway::Gateway;
use a2a_sample_agent::{card_for, AgentOptions, NewArtifact, Progress, SampleAgent};
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

pub async fn demo(listen: String) -> Result<(), String> {
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
    let cfg = Config::with_agents(
        listen,
        vec![
            AgentConfig::new("scripts", &scripts.base_url()),
            AgentConfig::new("summaries", &summaries.base_url()),
        ],
    );
    let gw = Gateway::start(cfg).await.map_err(|e| e.to_string())?;
    let base = format!("http://{}", gw.addr());
    announce(&format!("listening on {base}"));
    announce(&format!(
        "sample agents: scripts at {}, summaries at {}",
        scripts.base_url(),
        summaries.base_url()
    ));
    announce("preparing a finished sample task (about 4 s)...");

    let (task_id, artifact_id) = sample_task(&base).await?;
    let input =
        r#"{"input":{"topic":"average of the age column of a CSV file","filename":"ages.py"}}"#;
    let agentless =
        r#"{"agent":"summaries","input":{"topic":"word count of a text file","filename":"wc.py"}}"#;
    let json_h = "-H 'Content-Type: application/json'";
    let lines = [
        String::new(),
        "Try these (each works as printed):".into(),
        String::new(),
        "# the agents and their cards".into(),
        format!("curl -s {base}/agents"),
        format!("curl -s {base}/agents/scripts/agent-card.json"),
        "# create a task (202, SUBMITTED); the input is validated against the card first".into(),
        format!("curl -s -X POST {base}/agents/scripts/tasks {json_h} -d '{input}'"),
        "# the same without naming the route: the gateway finds the agent".into(),
        format!("curl -s -X POST {base}/tasks {json_h} -d '{agentless}'"),
        "# an input the card refuses: 422 with every violation, the agent never sees it".into(),
        format!("curl -s -X POST {base}/agents/scripts/tasks {json_h} -d '{{\"input\":{{\"topic\":7,\"filename\":\"x.sh\"}}}}'"),
        "# create a task and watch it work (log and artifact events), for 6 s".into(),
        format!("id=$(curl -s -X POST {base}/agents/scripts/tasks {json_h} -d '{input}' | sed -E 's/.*\"task_id\":\"([^\"]+)\".*/\\1/'); curl -sN --max-time 6 {base}/tasks/$id/stream; echo"),
        "# the finished sample task, its artifacts, and the generated script".into(),
        format!("curl -s {base}/tasks/{task_id}"),
        format!("curl -s {base}/tasks/{task_id}/artifacts"),
        format!("curl -s {base}/artifacts/{artifact_id}/content"),
        "# a finished task cannot be cancelled: 409 TASK_TERMINAL".into(),
        format!("curl -s -X POST {base}/tasks/{task_id}/cancel"),
        "# metrics".into(),
        format!("curl -s {base}/metrics | grep ^a2a_gateway_requests_total"),
        String::new(),
        "Ctrl-C stops the demo.".into(),
    ];
    announce(&lines.join("\n"));
    gw.run_until_signal().await;
    drop((scripts, summaries));
    Ok(())
}

/// Create a task through the gateway, wait for it to finish, list its artifacts (which teaches
/// the gateway where they live) and return the task id and the script's artifact id.
async fn sample_task(base: &str) -> Result<(String, String), String> {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let call = |method: &str, path: String, body: Option<Value>| {
        let client = client.clone();
        let req = Request::builder()
            .method(method)
            .uri(format!("{base}{path}"))
            .header("content-type", "application/json")
            .body(Full::new(
                body.map(|b| Bytes::from(b.to_string())).unwrap_or_default(),
            ));
        async move {
            let req = req.map_err(|e| e.to_string())?;
            let res = client
                .request(req)
                .await
                .map_err(|e| format!("{path}: {e}"))?;
            let status = res.status();
            let body = res
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            let v: Value = serde_json::from_slice(&body).map_err(|e| format!("{path}: {e}"))?;
            if !status.is_success() {
                return Err(format!("{path} answered {status}: {v}"));
            }
            Ok::<Value, String>(v)
        }
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    // The cards are fetched in the background; the first create may race them.
    let task = loop {
        match call(
            "POST",
            "/agents/scripts/tasks".into(),
            Some(json!({"input": {"topic": "fizzbuzz up to 100", "filename": "fizzbuzz.py"}})),
        )
        .await
        {
            Ok(t) => break t,
            Err(e) if Instant::now() > deadline => return Err(format!("sample task: {e}")),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    let id = task["task_id"]
        .as_str()
        .ok_or("sample task without task_id")?
        .to_owned();
    loop {
        let t = call("GET", format!("/tasks/{id}"), None).await?;
        if t["status"] == "COMPLETED" {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("sample task still {} after 20 s", t["status"]));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let list = call("GET", format!("/tasks/{id}/artifacts"), None).await?;
    let artifact = list["artifacts"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["type"] == "file"))
        .and_then(|a| a["artifact_id"].as_str())
        .ok_or("sample task has no file artifact")?
        .to_owned();
    Ok((id, artifact))
}

pub async fn sample_agent(listen: String, progress: bool, file_bytes: usize) -> Result<(), String> {
    let opts = AgentOptions {
        listen: parse_addr(&listen)?,
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
