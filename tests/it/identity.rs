//! The caller's identity, to the agent (`[[agents]] identity = "assertion"`): a2a-sdk agents
//! (tests/a2a/caller_agent.py, one per binding) verify each request's `A2A-Caller` with PyJWT
//! against the gateway's `/.well-known/jwks.json` and answer with what they verified. A key
//! client, a certificate client and a token subject of a real identity provider (node's
//! oidc-provider) are each named right, over both of the gateway's bindings to agents of both
//! bindings, answered by a Message, a Task and a stream; a client's own `A2A-Caller`, forged,
//! never reaches an agent (an a2a-sdk agent, nor a proxied Clawpedia agent, with or without
//! `identity`); the keys are published without credentials, public members only; an Ed25519
//! first key signs EdDSA assertions; the gateway's own calls for a task carry its owner; with
//! `identity = "token"` a token's own bytes reach an agent of its audience and no other.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use bytes::Bytes;
use hyper::Method;
use jsonwebtoken::{
    decode, decode_header, encode, Algorithm, DecodingKey, EncodingKey, Header, Validation,
};
use rcgen::DnType;
use serde_json::{json, Value};

use a2a_gateway::config::{
    AgentConfig, AssertionConfig, ClientAuth, ClientConfig, Config, Identity, OidcConfig, Right,
    ScopeRights,
};
use a2a_gateway::Gateway;

use crate::a2a_gateway::a2a_agent;
use crate::auth::client;
use crate::support::a2a_calls::message;
use crate::support::a2a_sdk::{listening, require_sdks, HTTP_JSON, JSONRPC};
use crate::support::child::repo;
use crate::support::idp::{self, free_port, Idp};
use crate::support::tls::{client_config, Ca, Files, Leaf};
use crate::support::{agent as sample_agent, good_input, sample::SampleAgent, within, Http};

const ALICE: &str = "alice-key-0123456789abcdef";
const MALLORY: &str = "mallory-key-0123456789abcdef";
const OPS: &str = "ops-key-0123456789abcdef012";

/// The certificate client's subject, first RDN first, and how `cert_subject` writes it.
const CERT_DN: &[(DnType, &str)] = &[
    (DnType::OrganizationName, "Example"),
    (DnType::CommonName, "orchestrator-a"),
];
const CERT_SUBJECT: &str = "CN=orchestrator-a,O=Example";

const H1: &[&[u8]] = &[b"http/1.1"];

/// The route names of the a2a-sdk agents: a JSON-RPC agent and an HTTP+JSON agent with
/// `identity = "assertion"`, and a JSON-RPC agent with no identity.
const RPC: &str = "rpc";
const REST: &str = "rest";
const PLAIN: &str = "plain";
/// Sample (Clawpedia) agents, whose requests come through the gateway's proxy: one with
/// `identity = "assertion"`, one without.
const CLAW_ID: &str = "claw-id";
const CLAW: &str = "claw";

/// A PKCS#8 PEM private key made by `openssl genpkey` in `dir`: `ec` (P-256) or `ed` (Ed25519).
fn openssl_key(dir: &Path, kind: &str) -> String {
    let path = dir.join(format!("{kind}.pem"));
    let algorithm: &[&str] = match kind {
        "ec" => &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
        _ => &["-algorithm", "ed25519"],
    };
    let out = Command::new("openssl")
        .arg("genpkey")
        .args(algorithm)
        .arg("-out")
        .arg(&path)
        .output()
        .expect("openssl runs");
    assert!(out.status.success(), "openssl genpkey: {out:?}");
    let pem = std::fs::read_to_string(&path).expect("key file");
    assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"), "{pem}");
    path.display().to_string()
}

/// tests/a2a/caller_agent.py serving one binding, killed when dropped.
struct CallerAgent {
    child: Child,
    base: String,
    binding: &'static str,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl CallerAgent {
    /// The agent named `audience` at the gateway `public_url`, trusting `ca_file` for its keys.
    fn start(
        binding: &'static str,
        public_url: &str,
        audience: &str,
        ca_file: &str,
    ) -> CallerAgent {
        require_sdks();
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("callers.jsonl");
        let mut cmd = Command::new("python3");
        cmd.arg(repo("tests/a2a/caller_agent.py"))
            .args(["--port", "0", "--binding", binding, "--gateway", public_url])
            .args(["--audience", audience, "--ca-file", ca_file])
            .arg("--caller-log")
            .arg(&log);
        // Without PyJWT the agent dies at its import, and `listening` shows that on stderr.
        let (child, base) = listening(cmd, "tests/a2a/caller_agent.py (needs PyJWT)");
        CallerAgent {
            child,
            base,
            binding,
            log,
            _dir: dir,
        }
    }

    /// Every request received so far: `{"method", "path", "callers": [raw values]}`.
    fn log(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("log line {l:?}: {e}")))
            .collect()
    }

    /// Every `A2A-Caller` value it received, in order.
    fn callers(&self) -> Vec<String> {
        self.log()
            .iter()
            .flat_map(|l| l["callers"].as_array().cloned().unwrap_or_default())
            .map(|v| v.as_str().expect("a string").to_owned())
            .collect()
    }

    /// Its message endpoint, called directly (not through the gateway) on its binding, with
    /// `headers`: what it verified.
    async fn ask_directly(&self, headers: &[(&str, &str)]) -> Value {
        let params = message("who am I", json!({}));
        let (path, body) = if self.binding == JSONRPC {
            let body = json!({"jsonrpc": "2.0", "id": "d-1", "method": "SendMessage",
                "params": params});
            ("/a2a/jsonrpc", body)
        } else {
            ("/a2a/rest/message:send", params)
        };
        let mut all = vec![("content-type", "application/json"), ("a2a-version", "1.0")];
        all.extend_from_slice(headers);
        let r = Http::new(self.base.clone())
            .send(Method::POST, path, &all, body.to_string())
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        let v = r.json();
        if self.binding == JSONRPC {
            seen(&v["result"])
        } else {
            seen(&v)
        }
    }
}

impl Drop for CallerAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a caller_agent.py answer says it verified, from the answer to a message (`result` of
/// JSON-RPC, the body of REST): a Message's text, or a Task's artifact.
fn seen(answer: &Value) -> Value {
    let text = answer["message"]["parts"][0]["text"]
        .as_str()
        .or_else(|| answer["task"]["artifacts"][0]["parts"][0]["text"].as_str())
        .or_else(|| answer["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str())
        .unwrap_or_else(|| panic!("no caller in the answer: {answer}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// How a client calls the gateway.
#[derive(Debug, Clone, Copy)]
enum Front {
    /// JSON-RPC at `/agents/{name}/jsonrpc`.
    Rpc,
    /// HTTP+JSON under `/agents/{name}/`.
    Rest,
}

/// The gateway in front of the five agents, TLS with optional client certificates and
/// `public_url` its own address, with: `alice` (key), `mallory` (key), `ops` (key, metrics),
/// `orchestrator-a` (certificate), and with an identity provider, its tokens as
/// `jwt:corp:{sub}` with the rights of the scope `a2a`.
struct Setup {
    ca: Ca,
    /// The TLS files and the CA the agents trust, kept as long as the gateway.
    _files: Files,
    public_url: String,
    /// The key files, first signing.
    key_files: Vec<String>,
    rpc: CallerAgent,
    rest: CallerAgent,
    plain: CallerAgent,
    claw_id: SampleAgent,
    claw: SampleAgent,
    idp: Option<Idp>,
    _gw: Gateway,
    _keys: tempfile::TempDir,
}

impl Setup {
    /// `first` names the signing key, `ec` or `ed`; both are published.
    async fn start(first: &str, with_idp: bool, tweak: impl FnOnce(&mut Config)) -> Setup {
        let keys = tempfile::tempdir().expect("temp dir");
        let (ec, ed) = (
            openssl_key(keys.path(), "ec"),
            openssl_key(keys.path(), "ed"),
        );
        let key_files = if first == "ec" {
            vec![ec, ed]
        } else {
            vec![ed, ec]
        };
        let ca = Ca::new("identity test CA");
        let files = Files::new();
        let tls = files.tls("server", &ca.server(), Some((&ca, ClientAuth::Optional)));
        let ca_file = files.write("ca.pem", &ca.pem());
        // The gateway's address is known before it starts: `public_url` is the assertions' iss.
        let port = free_port();
        let public_url = format!("https://127.0.0.1:{port}");
        let rpc = CallerAgent::start(JSONRPC, &public_url, RPC, &ca_file);
        let rest = CallerAgent::start(HTTP_JSON, &public_url, REST, &ca_file);
        let plain = CallerAgent::start(JSONRPC, &public_url, PLAIN, &ca_file);
        let (claw_id, claw) = (sample_agent().await, sample_agent().await);
        let idp = match with_idp {
            true => Some(Idp::start_anywhere().await),
            false => None,
        };
        let assertion = |mut a: AgentConfig| {
            a.identity = Identity::Assertion;
            a
        };
        let agents = vec![
            assertion(a2a_agent(RPC, &rpc.base)),
            assertion(a2a_agent(REST, &rest.base)),
            a2a_agent(PLAIN, &plain.base),
            assertion(AgentConfig::new(CLAW_ID, &claw_id.base_url())),
            AgentConfig::new(CLAW, &claw.base_url()),
        ];
        let mut cfg =
            Config::with_agents(format!("127.0.0.1:{port}").parse().expect("addr"), agents);
        cfg.tls = Some(tls);
        cfg.public_url = Some(public_url.clone());
        cfg.clients = vec![
            client("alice", ALICE, &["*"], &[Right::Tasks, Right::Streams]),
            client("mallory", MALLORY, &["*"], &[Right::Tasks, Right::Streams]),
            client("ops", OPS, &["*"], &[Right::Metrics]),
            ClientConfig {
                name: "orchestrator-a".into(),
                cert_subject: Some(CERT_SUBJECT.into()),
                can: vec![Right::Tasks, Right::Streams],
                ..ClientConfig::default()
            },
        ];
        if let Some(idp) = &idp {
            cfg.auth.oidc = vec![OidcConfig {
                name: "corp".into(),
                issuer: idp.issuer.clone(),
                audience: idp::AUDIENCE.into(),
                scopes: [(
                    "a2a".to_owned(),
                    ScopeRights {
                        can: vec![Right::Tasks, Right::Streams],
                        ..ScopeRights::default()
                    },
                )]
                .into(),
                ..OidcConfig::default()
            }];
        }
        cfg.auth.assertion = Some(AssertionConfig {
            key_files: key_files.clone(),
        });
        tweak(&mut cfg);
        let gw = Gateway::start(cfg).await.expect("gateway starts");
        assert_eq!(gw.addr().port(), port);
        let s = Setup {
            ca,
            _files: files,
            public_url,
            key_files,
            rpc,
            rest,
            plain,
            claw_id,
            claw,
            idp,
            _gw: gw,
            _keys: keys,
        };
        s.http(None).ready().await;
        if s.idp.is_some() {
            idp::keys_held(&s.http(None), "corp", OPS).await;
        }
        s
    }

    /// A client of the gateway, presenting `cert` if given.
    fn http(&self, cert: Option<&Leaf>) -> Http {
        Http::tls(self.public_url.clone(), client_config(&self.ca, cert, H1))
    }

    /// The certificate of `orchestrator-a`.
    fn cert(&self) -> Leaf {
        self.ca.client(CERT_DN)
    }

    fn agent(&self, name: &str) -> &CallerAgent {
        match name {
            RPC => &self.rpc,
            REST => &self.rest,
            _ => &self.plain,
        }
    }
}

/// Send `text` to agent `agent` through the gateway over `front`, as `http` with `bearer` and
/// `extra` headers, streamed or not: what the agent verified.
async fn ask(
    http: &Http,
    bearer: Option<&str>,
    agent: &str,
    front: Front,
    stream: bool,
    text: &str,
    extra: &[(&str, &str)],
) -> Value {
    let auth = bearer.map(|b| format!("Bearer {b}"));
    let mut headers = vec![("a2a-version", "1.0")];
    if let Some(a) = &auth {
        headers.push(("authorization", a.as_str()));
    }
    headers.extend_from_slice(extra);
    let params = message(text, json!({}));
    let (path, body) = match front {
        Front::Rpc => {
            headers.push(("content-type", "application/json"));
            let method = if stream {
                "SendStreamingMessage"
            } else {
                "SendMessage"
            };
            let body = json!({"jsonrpc": "2.0", "id": "c-1", "method": method, "params": params});
            (format!("/agents/{agent}/jsonrpc"), body)
        }
        Front::Rest => {
            headers.push(("content-type", "application/a2a+json"));
            let verb = if stream { "stream" } else { "send" };
            (format!("/agents/{agent}/message:{verb}"), params)
        }
    };
    let r = http
        .send(Method::POST, &path, &headers, Bytes::from(body.to_string()))
        .await;
    let what = format!("{front:?} {agent} stream={stream} {text:?}");
    assert_eq!(r.status, 200, "{what}: {r:?}");
    if !stream {
        let v = r.json();
        return match front {
            Front::Rpc => {
                assert!(v["error"].is_null(), "{what}: {v}");
                seen(&v["result"])
            }
            Front::Rest => seen(&v),
        };
    }
    // A stream: the first event that carries the agent's answer.
    let text = String::from_utf8_lossy(&r.body).into_owned();
    for data in text.lines().filter_map(|l| l.strip_prefix("data:")) {
        let event: Value = serde_json::from_str(data.trim()).expect("an event");
        let event = match front {
            Front::Rpc => {
                assert!(event["error"].is_null(), "{what}: {text}");
                event["result"].clone()
            }
            Front::Rest => event,
        };
        if event.get("message").is_some()
            || event.get("artifactUpdate").is_some()
            || event["task"]["artifacts"].is_array()
        {
            return seen(&event);
        }
    }
    panic!("{what}: no answer on the stream: {text}")
}

/// Assert the agent verified `sub` as `kind`, signed by the first key (`kid`, `alg`), and
/// `idp` (`idp_iss`, `idp_sub`) for a token, nulls otherwise.
fn assert_caller(
    seen: &Value,
    sub: &str,
    kind: &str,
    idp: Option<(&str, &str)>,
    signer: (&str, &str),
    what: &str,
) {
    assert!(seen["error"].is_null(), "{what}: {seen}");
    assert_eq!(seen["sub"], sub, "{what}: {seen}");
    assert_eq!(seen["client_kind"], kind, "{what}: {seen}");
    let (iss, idp_sub) = idp.map_or((Value::Null, Value::Null), |(i, s)| (json!(i), json!(s)));
    assert_eq!(seen["idp_iss"], iss, "{what}: {seen}");
    assert_eq!(seen["idp_sub"], idp_sub, "{what}: {seen}");
    assert_eq!(
        (seen["kid"].as_str(), seen["alg"].as_str()),
        (Some(signer.0), Some(signer.1)),
        "{what}: signed by the first key: {seen}"
    );
    let lifetime = seen["lifetime"].as_i64().expect("a lifetime");
    assert!((1..=60).contains(&lifetime), "{what}: exp - iat: {seen}");
    assert!(
        seen["jti"].as_str().is_some_and(|j| !j.is_empty()),
        "{what}: {seen}"
    );
}

/// The gateway's published keys, fetched without credentials.
async fn jwks(s: &Setup) -> Vec<Value> {
    let r = s.http(None).get("/.well-known/jwks.json").await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        r.header("content-type").is_some_and(
            |c| c.starts_with("application/json") || c.starts_with("application/jwk-set+json")
        ),
        "{r:?}"
    );
    r.json()["keys"]
        .as_array()
        .unwrap_or_else(|| panic!("no keys: {}", r.json()))
        .clone()
}

/// The kid the gateway publishes for the key of `kty` (`EC` or `OKP`).
fn kid_of(keys: &[Value], kty: &str) -> String {
    let k = keys
        .iter()
        .find(|k| k["kty"] == kty)
        .unwrap_or_else(|| panic!("no {kty} key in {keys:?}"));
    k["kid"].as_str().expect("a kid").to_owned()
}

/// A client, and what an agent must be told of it.
struct Expected<'a> {
    label: &'a str,
    http: &'a Http,
    bearer: Option<&'a str>,
    sub: &'a str,
    kind: &'a str,
    /// `idp_iss` and `idp_sub`, for a token.
    idp: Option<(&'a str, &'a str)>,
}

#[tokio::test(flavor = "multi_thread")]
async fn the_agent_verifies_a_key_a_certificate_and_a_token_client_over_both_bindings() {
    let s = Setup::start("ec", true, |_| {}).await;
    let idp = s.idp.as_ref().expect("a provider");
    let signer = kid_of(&jwks(&s).await, "EC");
    let signer = (signer.as_str(), "ES256");
    let token = idp.token().await;
    let idp_iss = idp::claims(&token)["iss"]
        .as_str()
        .expect("the token's iss")
        .to_owned();
    assert_eq!(idp_iss, idp.issuer);
    let keyed = s.http(None);
    let certified = s.http(Some(&s.cert()));
    let callers = [
        Expected {
            label: "key",
            http: &keyed,
            bearer: Some(ALICE),
            sub: "alice",
            kind: "key",
            idp: None,
        },
        Expected {
            label: "certificate",
            http: &certified,
            bearer: None,
            sub: "orchestrator-a",
            kind: "certificate",
            idp: None,
        },
        Expected {
            label: "token",
            http: &keyed,
            bearer: Some(&token),
            sub: "jwt:corp:orchestrator",
            kind: "token",
            idp: Some((&idp_iss, "orchestrator")),
        },
    ];
    for c in callers {
        for agent in [RPC, REST] {
            for front in [Front::Rpc, Front::Rest] {
                // A Message, a Task, and a stream.
                for (stream, text) in [(false, "who am I"), (false, "task"), (true, "who am I")] {
                    let what = format!(
                        "{} client to {agent} over {front:?}, {text:?}, stream={stream}",
                        c.label
                    );
                    let seen = ask(c.http, c.bearer, agent, front, stream, text, &[]).await;
                    assert_caller(&seen, c.sub, c.kind, c.idp, signer, &what);
                }
            }
        }
    }
    // Every request that carried a message carried one assertion, and the agent without
    // `identity` heard of none.
    for name in [RPC, REST] {
        let messages: Vec<Value> = s
            .agent(name)
            .log()
            .into_iter()
            .filter(|l| l["method"] == "POST")
            .collect();
        assert_eq!(messages.len(), 3 * 2 * 3, "{name}: {messages:?}");
        for m in &messages {
            assert_eq!(
                m["callers"].as_array().map(Vec::len),
                Some(1),
                "{name}: {m}"
            );
        }
    }
    let seen = ask(
        &keyed,
        Some(ALICE),
        PLAIN,
        Front::Rpc,
        false,
        "who am I",
        &[],
    )
    .await;
    assert_eq!(seen, json!({"error": "no caller"}));
}

/// A JWT of the client's own, signed by a key of its own, claiming to be `admin` to `agent`
/// with the gateway's issuer and signing kid: a forgery the agent would refuse, were it to
/// arrive.
fn forged(s: &Setup, dir: &Path, agent: &str, kid: &str) -> String {
    let pem = std::fs::read(openssl_key(dir, "ec")).expect("key");
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(kid.to_owned());
    let now = chrono::Utc::now().timestamp();
    let claims = json!({"iss": s.public_url, "aud": agent, "sub": "admin", "client_kind": "key",
        "iat": now, "exp": now + 60, "jti": uuid::Uuid::new_v4().to_string()});
    encode(
        &header,
        &claims,
        &EncodingKey::from_ec_pem(&pem).expect("an EC key"),
    )
    .expect("signed")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_clients_own_a2a_caller_never_reaches_the_agent() {
    let s = Setup::start("ec", false, |_| {}).await;
    let signer = kid_of(&jwks(&s).await, "EC");
    let dir = tempfile::tempdir().expect("temp dir");
    let keyed = s.http(None);
    let certified = s.http(Some(&s.cert()));
    for agent in [RPC, REST, PLAIN] {
        let fake = forged(&s, dir.path(), agent, &signer);
        // The forgery, told straight to the agent, is heard and refused: the log and the check
        // below would see it.
        let direct = s.agent(agent).ask_directly(&[("a2a-caller", &fake)]).await;
        assert_eq!(
            direct["error"], "invalid caller: InvalidSignatureError: Signature verification failed",
            "{direct}"
        );
        assert!(s.agent(agent).callers().contains(&fake));
        let heard = s.agent(agent).callers().len();
        for front in [Front::Rpc, Front::Rest] {
            for stream in [false, true] {
                let what = format!("mallory to {agent} over {front:?}, stream={stream}");
                let seen = ask(
                    &keyed,
                    Some(MALLORY),
                    agent,
                    front,
                    stream,
                    "who am I",
                    &[("a2a-caller", &fake)],
                )
                .await;
                if agent == PLAIN {
                    assert_eq!(seen, json!({"error": "no caller"}), "{what}");
                } else {
                    assert_caller(&seen, "mallory", "key", None, (&signer, "ES256"), &what);
                }
            }
            // A certificate client's forgery, and two of them on one request.
            let seen = ask(
                &certified,
                None,
                agent,
                front,
                false,
                "who am I",
                &[("a2a-caller", &fake), ("a2a-caller", "second")],
            )
            .await;
            if agent == PLAIN {
                assert_eq!(seen, json!({"error": "no caller"}));
            } else {
                assert_caller(
                    &seen,
                    "orchestrator-a",
                    "certificate",
                    None,
                    (&signer, "ES256"),
                    "certificate forging",
                );
            }
        }
        // What arrived through the gateway: the gateway's assertions only, one a request.
        let after: Vec<String> = s.agent(agent).callers().split_off(heard);
        assert_eq!(
            after.len(),
            if agent == PLAIN { 0 } else { 2 * 3 },
            "{agent}: {after:?}"
        );
        for c in &after {
            assert_ne!(c, &fake, "{agent}: the forgery arrived");
            assert_ne!(c, "second", "{agent}: the forgery arrived");
            assert_eq!(idp::header(c)["kid"], signer, "{agent}: {c}");
        }
    }

    // Through the proxy to sample agents: the client's headers go on there, but not this one.
    let keys = jwks(&s).await;
    for (name, agent) in [(CLAW_ID, &s.claw_id), (CLAW, &s.claw)] {
        let fake = forged(&s, dir.path(), name, &signer);
        let r = keyed
            .post_json_as(
                &format!("/agents/{name}/tasks"),
                MALLORY,
                &json!({ "input": good_input() }),
                &[("a2a-caller", &fake), ("x-kept", "yes")],
            )
            .await;
        assert_eq!(r.status, 202, "{name}: {r:?}");
        let created = agent
            .requests()
            .into_iter()
            .rfind(|r| r.method == "POST")
            .expect("the create reached the agent");
        assert_eq!(
            created.headers.get("x-kept").map(|v| v.as_bytes()),
            Some(&b"yes"[..])
        );
        let callers: Vec<String> = created
            .headers
            .get_all("a2a-caller")
            .iter()
            .map(|v| v.to_str().expect("ascii").to_owned())
            .collect();
        assert!(!callers.contains(&fake), "{name}: the forgery arrived");
        if name == CLAW {
            assert!(callers.is_empty(), "{name}: {callers:?}");
            continue;
        }
        assert_eq!(callers.len(), 1, "{name}: {callers:?}");
        let claims = verify_here(&callers[0], &keys, name, &s.public_url);
        assert_eq!(claims["sub"], "mallory", "{claims}");
        assert_eq!(claims["client_kind"], "key", "{claims}");
    }
}

/// `token` verified here, with jsonwebtoken, against the gateway's published `keys` (by its
/// kid) for the audience `aud` and the issuer `iss`: its claims.
fn verify_here(token: &str, keys: &[Value], aud: &str, iss: &str) -> Value {
    let header = decode_header(token).expect("a JWT header");
    let kid = header.kid.clone().expect("a kid");
    let jwk = keys
        .iter()
        .find(|k| k["kid"] == kid.as_str())
        .unwrap_or_else(|| panic!("kid {kid} is not published: {keys:?}"));
    let jwk: jsonwebtoken::jwk::Jwk = serde_json::from_value(jwk.clone()).expect("a JWK");
    let key = DecodingKey::from_jwk(&jwk).expect("a public key");
    let mut v = Validation::new(header.alg);
    v.set_audience(&[aud]);
    v.set_issuer(&[iss]);
    v.set_required_spec_claims(&["exp", "iat", "sub", "aud", "iss"]);
    decode::<Value>(token, &key, &v)
        .unwrap_or_else(|e| panic!("{token} does not verify: {e}"))
        .claims
}

#[tokio::test(flavor = "multi_thread")]
async fn the_gateway_publishes_its_public_keys_without_credentials() {
    let s = Setup::start("ec", false, |_| {}).await;
    let keys = jwks(&s).await;
    // Both files' keys, each named, public members only.
    assert_eq!(keys.len(), 2, "{keys:?}");
    let ec = keys.iter().find(|k| k["kty"] == "EC").expect("the EC key");
    assert_eq!(ec["crv"], "P-256", "{ec}");
    assert!(ec["x"].is_string() && ec["y"].is_string(), "{ec}");
    let ed = keys
        .iter()
        .find(|k| k["kty"] == "OKP")
        .expect("the Ed25519 key");
    assert_eq!(ed["crv"], "Ed25519", "{ed}");
    assert!(ed["x"].is_string(), "{ed}");
    for k in &keys {
        assert!(k["kid"].as_str().is_some_and(|k| !k.is_empty()), "{k}");
        for private in ["d", "p", "q", "dp", "dq", "qi", "k"] {
            assert!(k.get(private).is_none(), "a private member {private}: {k}");
        }
    }
    assert_ne!(keys[0]["kid"], keys[1]["kid"]);
    // No private key material anywhere in the document, whatever its member names.
    let text = serde_json::to_string(&keys).expect("json");
    for file in &s.key_files {
        let pem = std::fs::read_to_string(file).expect("key file");
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        assert!(!text.contains(&body), "the key file's PEM is published");
    }
    // The same document to a client with credentials, and to a certificate client.
    let with_key = s
        .http(None)
        .get_as("/.well-known/jwks.json", ALICE)
        .await
        .json();
    assert_eq!(with_key["keys"], json!(keys));
    let r = s.http(Some(&s.cert())).get("/.well-known/jwks.json").await;
    assert_eq!(r.json()["keys"], json!(keys));
    // And the agents check with them: the kid of an assertion is the first key's.
    let seen = ask(
        &s.http(None),
        Some(ALICE),
        RPC,
        Front::Rpc,
        false,
        "who am I",
        &[],
    )
    .await;
    assert_eq!(seen["kid"], ec["kid"], "{seen}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ed25519_first_key_signs_eddsa_assertions() {
    let s = Setup::start("ed", false, |_| {}).await;
    let keys = jwks(&s).await;
    assert_eq!(keys.len(), 2, "{keys:?}");
    let signer = kid_of(&keys, "OKP");
    for agent in [RPC, REST] {
        for front in [Front::Rpc, Front::Rest] {
            let what = format!("alice to {agent} over {front:?}");
            let seen = ask(
                &s.http(None),
                Some(ALICE),
                agent,
                front,
                false,
                "who am I",
                &[],
            )
            .await;
            assert_caller(&seen, "alice", "key", None, (&signer, "EdDSA"), &what);
            let seen = ask(
                &s.http(Some(&s.cert())),
                None,
                agent,
                front,
                false,
                "task",
                &[],
            )
            .await;
            assert_caller(
                &seen,
                "orchestrator-a",
                "certificate",
                None,
                (&signer, "EdDSA"),
                &what,
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_gateways_own_calls_for_a_task_carry_its_owner() {
    let s = Setup::start("ec", false, |cfg| {
        for a in &mut cfg.agents {
            a.reconcile_after = Duration::from_millis(300);
        }
    })
    .await;
    let signer = kid_of(&jwks(&s).await, "EC");
    let http = s.http(None);
    for agent in [RPC, REST] {
        // alice's task, answered while it works: the gateway asks the agent for it later.
        let mut params = message("slow task", json!({}));
        params["configuration"] = json!({"returnImmediately": true});
        let body =
            json!({"jsonrpc": "2.0", "id": "c-1", "method": "SendMessage", "params": params});
        let auth = format!("Bearer {ALICE}");
        let headers = [
            ("a2a-version", "1.0"),
            ("content-type", "application/json"),
            ("authorization", auth.as_str()),
        ];
        let path = format!("/agents/{agent}/jsonrpc");
        let r = http
            .send(Method::POST, &path, &headers, body.to_string())
            .await;
        let v = r.json();
        let id = v["result"]["task"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{agent}: a task: {v}"))
            .to_owned();
        assert_ne!(
            v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{agent}: {v}"
        );
        let theirs = || {
            s.agent(agent).log().into_iter().find(|l| {
                l["verified"]
                    .as_array()
                    .is_some_and(|v| v.iter().any(|c| c["client_kind"] == "gateway"))
            })
        };
        let asked = within(Duration::from_secs(10), || async { theirs().is_some() }).await;
        assert!(
            asked,
            "{agent}: no call of the gateway's own: {:?}",
            s.agent(agent).log()
        );
        let line = theirs().expect("a call");
        assert_eq!(line["callers"].as_array().map(Vec::len), Some(1), "{line}");
        let seen = &line["verified"][0];
        assert_eq!(seen["sub"], "alice", "{agent}: the task's owner: {line}");
        assert_eq!(seen["kid"], signer.as_str(), "{line}");
        assert!(
            seen["idp_iss"].is_null() && seen["idp_sub"].is_null(),
            "{line}"
        );
        // The task itself was made for alice as a key client, and ends.
        let done = within(Duration::from_secs(15), || async {
            let body = json!({"jsonrpc": "2.0", "id": "c-1", "method": "GetTask",
                "params": {"id": id}});
            let r = http
                .send(Method::POST, &path, &headers, body.to_string())
                .await;
            r.json()["result"]["status"]["state"] == "TASK_STATE_COMPLETED"
        })
        .await;
        assert!(done, "{agent}: the task never completed");
        let body =
            json!({"jsonrpc": "2.0", "id": "c-1", "method": "GetTask", "params": {"id": id}});
        let task = http
            .send(Method::POST, &path, &headers, body.to_string())
            .await
            .json();
        let seen = seen_of_task(&task["result"]);
        assert_caller(&seen, "alice", "key", None, (&signer, "ES256"), agent);
    }
}

/// What a Task's artifact says the agent verified.
fn seen_of_task(task: &Value) -> Value {
    seen(&json!({ "task": task }))
}

/// `identity = "token"`: a token caller's own bearer token reaches the agent as `A2A-Caller`,
/// exactly as presented, when its audience includes the agent's `token_audience`; a key client
/// of that agent gets an assertion; a token not meant for an agent is refused 403 FORBIDDEN
/// naming the audience, before the agent is called, over JSON-RPC and HTTP+JSON alike.
#[tokio::test(flavor = "multi_thread")]
async fn token_mode_passes_a_callers_own_token_only_to_an_agent_of_its_audience() {
    let s = Setup::start("ec", true, |cfg| {
        for a in &mut cfg.agents {
            if a.name == RPC {
                a.identity = Identity::Token;
                a.token_audience = Some(idp::AUDIENCE.into());
            } else if a.name == REST {
                a.identity = Identity::Token;
                a.token_audience = Some("downstream-api".into());
            }
        }
    })
    .await;
    let http = s.http(None);
    let token = s.idp.as_ref().expect("a provider").token().await;

    // Its audience includes the RPC agent's: the token itself arrives.
    let before = s.rpc.callers().len();
    let auth = format!("Bearer {token}");
    let body = json!({"jsonrpc": "2.0", "id": "t-1", "method": "SendMessage",
        "params": message("who am I", json!({}))});
    let headers = [
        ("a2a-version", "1.0"),
        ("content-type", "application/json"),
        ("authorization", auth.as_str()),
    ];
    let r = http
        .send(
            Method::POST,
            &format!("/agents/{RPC}/jsonrpc"),
            &headers,
            Bytes::from(body.to_string()),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let callers = s.rpc.callers();
    assert_eq!(
        &callers[before..],
        std::slice::from_ref(&token),
        "the caller's own token"
    );

    // A key client of that agent: an assertion, verified by the agent.
    let keys = jwks(&s).await;
    let seen = ask(&http, Some(ALICE), RPC, Front::Rpc, false, "who", &[]).await;
    assert_caller(
        &seen,
        "alice",
        "key",
        None,
        (&kid_of(&keys, "EC"), "ES256"),
        "key client of a token agent",
    );

    // Not meant for the REST agent: 403 naming its audience, and the agent never called.
    let before = s.rest.log().len();
    let r = http
        .send(
            Method::POST,
            &format!("/agents/{REST}/jsonrpc"),
            &headers,
            Bytes::from(body.to_string()),
        )
        .await;
    // After admission, as a method refusal: HTTP 200, -32000 with the call's id.
    assert_eq!(r.status, 200, "JSON-RPC SendMessage: {r:?}");
    let v = r.json();
    assert_eq!(v["error"]["code"], -32000, "{v}");
    assert_eq!(v["id"], "t-1", "{v}");
    assert_eq!(v["error"]["data"][0]["reason"], "FORBIDDEN", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("downstream-api")),
        "{v}"
    );
    let rest_headers = [
        ("a2a-version", "1.0"),
        ("content-type", "application/a2a+json"),
        ("authorization", auth.as_str()),
    ];
    let r = http
        .send(
            Method::POST,
            &format!("/agents/{REST}/message:send"),
            &rest_headers,
            Bytes::from(message("who am I", json!({})).to_string()),
        )
        .await;
    assert_eq!(r.status, 403, "HTTP+JSON SendMessage: {r:?}");
    assert_eq!(
        r.json()["error"]["details"][0]["reason"],
        "FORBIDDEN",
        "{r:?}"
    );
    assert_eq!(s.rest.log().len(), before, "the agent was not called");
}
