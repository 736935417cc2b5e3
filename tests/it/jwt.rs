//! JWT bearer tokens (`[auth.jwt]`), signed with the test keys in tests/fixtures/jwt and checked
//! against their JWKS: RS256, ES256 and EdDSA accepted; expired, wrong `aud` or `iss`, not yet
//! valid, `alg: none`, and HS256 signed with the public key (algorithm confusion) refused. The
//! client's agents and rights come from its `[[clients]]` entry when it has one, else from the
//! token's `a2a_agents` / `a2a_can` claims.

use std::path::PathBuf;

use base64::Engine;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use a2a_gateway::config::{ClientConfig, JwtConfig, Right};

use crate::support::*;

const ISSUER: &str = "https://idp.example.test/";
const AUDIENCE: &str = "a2a-gateway";

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/jwt")
        .join(name)
}

fn pem(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).expect("fixture key")
}

pub fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Claims valid for the next ten minutes, with `extra` merged in.
pub fn claims(sub: &str, extra: Value) -> Value {
    let mut c = json!({
        "sub": sub, "iss": ISSUER, "aud": AUDIENCE,
        "iat": now(), "exp": now() + 600,
    });
    if let (Some(c), Value::Object(extra)) = (c.as_object_mut(), extra) {
        c.extend(extra);
    }
    c
}

pub fn sign(alg: Algorithm, kid: &str, claims: &Value) -> String {
    let key = match alg {
        Algorithm::RS256 => EncodingKey::from_rsa_pem(&pem("rsa.pem")),
        Algorithm::ES256 => EncodingKey::from_ec_pem(&pem("ec.pem")),
        Algorithm::EdDSA => EncodingKey::from_ed_pem(&pem("ed25519.pem")),
        other => panic!("no test key for {other:?}"),
    }
    .expect("test key");
    let mut header = Header::new(alg);
    header.kid = Some(kid.into());
    encode(&header, claims, &key).expect("signed")
}

fn b64(v: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v)
}

async fn create(g: &TestGateway, agent: &str, token: &str) -> Resp {
    let body = json!({ "input": good_input() });
    g.http
        .post_json_as(&format!("/agents/{agent}/tasks"), token, &body, &[])
        .await
}

async fn gateway() -> (sample::SampleAgent, sample::SampleAgent, TestGateway) {
    gateway_with_leeway(JwtConfig::default().leeway).await
}

async fn gateway_with_leeway(
    leeway: std::time::Duration,
) -> (sample::SampleAgent, sample::SampleAgent, TestGateway) {
    let (a, b) = (agent().await, agent().await);
    let g = TestGateway::start(&[("a", &a), ("b", &b)], |cfg| {
        cfg.auth.jwt = Some(JwtConfig {
            jwks_file: fixture("jwks.json").to_string_lossy().into_owned(),
            issuer: ISSUER.into(),
            audience: AUDIENCE.into(),
            leeway,
        });
        // carol has an entry (no key: JWT only): agent a, tasks, metrics.
        cfg.clients = vec![ClientConfig {
            name: "carol".into(),
            key_sha256: None,
            jwt_subject: Some("carol".into()),
            agents: vec!["a".into()],
            can: vec![Right::Tasks, Right::Metrics],
            max_streams: 10,
            ..ClientConfig::default()
        }];
    })
    .await;
    g.ready().await;
    (a, b, g)
}

#[tokio::test]
async fn tokens_of_every_allowed_algorithm_are_accepted_with_their_rights() {
    let (_a, _b, g) = gateway().await;
    // carol: her [[clients]] entry decides, whatever her token claims.
    let carol = sign(
        Algorithm::RS256,
        "rsa-1",
        &claims(
            "carol",
            json!({ "a2a_agents": ["*"], "a2a_can": ["admin"] }),
        ),
    );
    assert_eq!(create(&g, "a", &carol).await.status, 202);
    assert_api_error(&create(&g, "b", &carol).await, 403, "FORBIDDEN");
    // dave: no entry; his claims decide.
    let dave = sign(
        Algorithm::ES256,
        "ec-1",
        &claims("dave", json!({ "a2a_agents": ["b"], "a2a_can": ["tasks"] })),
    );
    let made = create(&g, "b", &dave).await;
    assert_eq!(made.status, 202, "{made:?}");
    assert_api_error(&create(&g, "a", &dave).await, 403, "FORBIDDEN");
    // frank: no entry and no claims: a valid token that grants nothing.
    let frank = sign(Algorithm::EdDSA, "ed-1", &claims("frank", json!({})));
    assert_api_error(&create(&g, "a", &frank).await, 403, "FORBIDDEN");
    let catalog = g.http.get_as("/agents", &frank).await;
    assert_eq!(catalog.json()["agents"], json!([]), "frank sees no agent");
    // erin: every agent, tasks.
    let erin_claims = json!({ "a2a_agents": ["*"], "a2a_can": ["tasks"] });
    let erin = sign(
        Algorithm::EdDSA,
        "ed-1",
        &claims("erin", erin_claims.clone()),
    );
    let erins = create(&g, "a", &erin).await;
    assert_eq!(erins.status, 202, "{erins:?}");
    // Ownership follows `sub`: dave cannot read erin's task; erin can.
    let path = format!("/tasks/{}", erins.json()["task_id"].as_str().expect("id"));
    let read = |token: String| {
        let (g, path) = (&g, path.clone());
        async move { g.http.get_as(&path, &token).await }
    };
    assert_eq!(read(erin.clone()).await.status, 200);
    assert_api_error(&read(dave.clone()).await, 404, "TASK_NOT_FOUND");
    // A token without a kid is tried on the keys of its algorithm.
    let no_kid = {
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = None;
        let key = EncodingKey::from_ed_pem(&pem("ed25519.pem")).expect("key");
        encode(&header, &claims("erin", erin_claims), &key).expect("signed")
    };
    assert_eq!(read(no_kid).await.status, 200);
    // Metrics: carol by name, subjects without an entry as `jwt`.
    let text = g.http.get_as("/metrics", &carol).await;
    assert_eq!(text.status, 200);
    let text = String::from_utf8(text.body.to_vec()).expect("utf8");
    let by = |client: &str, status: &str| {
        metric_value(
            &text,
            "a2a_gateway_requests_total",
            &[("client", client), ("status", status)],
        )
    };
    assert_eq!(by("carol", "202"), 1.0);
    assert_eq!(by("jwt", "202"), 2.0);
    assert_eq!(by("jwt", "403"), 2.0, "dave on a, frank");
    assert!(!text.contains("client=\"dave\"") && !text.contains("client=\"erin\""));
}

#[tokio::test]
async fn forged_expired_and_misdirected_tokens_are_refused() {
    let (a, _b, g) = gateway().await;
    let good = claims("erin", json!({}));
    let hs256_with_public_key = {
        // The classic confusion: HMAC keyed with the RSA public key, which anyone has.
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some("rsa-1".into());
        let key = EncodingKey::from_secret(&pem("rsa.pub.pem"));
        encode(&header, &good, &key).expect("signed")
    };
    let alg_none = format!(
        "{}.{}.",
        b64(br#"{"alg":"none","typ":"JWT"}"#),
        b64(&serde_json::to_vec(&good).expect("json"))
    );
    let tampered = {
        let t = sign(Algorithm::RS256, "rsa-1", &good);
        let parts: Vec<&str> = t.split('.').collect();
        let other = b64(&serde_json::to_vec(&claims("carol", json!({}))).expect("json"));
        format!("{}.{other}.{}", parts[0], parts[2])
    };
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "expired",
            sign(
                Algorithm::RS256,
                "rsa-1",
                &claims("erin", json!({ "exp": now() - 3600, "iat": now() - 7200 })),
            ),
            "expired",
        ),
        (
            "wrong audience",
            sign(
                Algorithm::RS256,
                "rsa-1",
                &claims("erin", json!({ "aud": "another-api" })),
            ),
            "invalid",
        ),
        (
            "wrong issuer",
            sign(
                Algorithm::ES256,
                "ec-1",
                &claims("erin", json!({ "iss": "https://evil.test/" })),
            ),
            "invalid",
        ),
        (
            "not yet valid",
            sign(
                Algorithm::EdDSA,
                "ed-1",
                &claims("erin", json!({ "nbf": now() + 3600 })),
            ),
            "invalid",
        ),
        ("alg none", alg_none, "invalid"),
        (
            "HS256 with the public key",
            hs256_with_public_key,
            "invalid",
        ),
        ("tampered payload", tampered, "invalid"),
        (
            "key of another algorithm",
            {
                // Signed with the EC key, but claiming the RSA key's kid.
                let mut header = Header::new(Algorithm::ES256);
                header.kid = Some("rsa-1".into());
                let key = EncodingKey::from_ec_pem(&pem("ec.pem")).expect("key");
                encode(&header, &good, &key).expect("signed")
            },
            "invalid",
        ),
        (
            "no sub",
            sign(
                Algorithm::RS256,
                "rsa-1",
                &json!({ "iss": ISSUER, "aud": AUDIENCE, "exp": now() + 600 }),
            ),
            "invalid",
        ),
    ];
    for (what, token, _) in &cases {
        let r = create(&g, "a", token).await;
        let e = assert_api_error(&r, 401, "UNAUTHORIZED");
        let challenge = r.header("www-authenticate").unwrap_or_default();
        assert!(challenge.contains("invalid_token"), "{what}: {challenge}");
        // The message never echoes the token.
        assert!(!e.to_string().contains(token.as_str()), "{what}");
    }
    assert_eq!(
        a.request_count(sample::Route::CreateTask),
        0,
        "no refused token reached the agent"
    );
    let carol = sign(Algorithm::RS256, "rsa-1", &claims("carol", json!({})));
    let text = g.http.get_as("/metrics", &carol).await;
    let text = String::from_utf8(text.body.to_vec()).expect("utf8");
    let reason = |r: &str| metric_value(&text, "a2a_gateway_auth_failures_total", &[("reason", r)]);
    let want = |r: &str| cases.iter().filter(|c| c.2 == r).count() as f64;
    assert_eq!(reason("expired"), want("expired"));
    assert_eq!(reason("invalid"), want("invalid"));
}

/// A verified token is remembered, but never past its `exp`: the same token that worked is
/// refused once it has expired.
#[tokio::test]
async fn a_remembered_token_still_expires() {
    let (_a, _b, g) = gateway_with_leeway(std::time::Duration::ZERO).await;
    let exp = now() + 2;
    let token = sign(
        Algorithm::RS256,
        "rsa-1",
        &claims("carol", json!({ "exp": exp })),
    );
    assert_eq!(create(&g, "a", &token).await.status, 202);
    assert_eq!(create(&g, "a", &token).await.status, 202, "from the cache");
    while now() <= exp {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let r = create(&g, "a", &token).await;
    assert_api_error(&r, 401, "UNAUTHORIZED");
    assert!(r
        .header("www-authenticate")
        .unwrap_or_default()
        .contains("expired"));
}

const KEYED: &str = "keyed-key-0123456789abcdef";

/// Token subjects at 2 requests a second, a bucket of 2; carol bound (no rate of her own) with
/// `metrics`; a key client without a rate.
fn token_rates(cfg: &mut a2a_gateway::config::Config) {
    cfg.auth.jwt = Some(JwtConfig {
        jwks_file: fixture("jwks.json").to_string_lossy().into_owned(),
        issuer: ISSUER.into(),
        audience: AUDIENCE.into(),
        ..JwtConfig::default()
    });
    cfg.auth.token_rate_per_sec = 2.0;
    cfg.auth.token_burst = Some(2);
    cfg.clients = vec![
        ClientConfig {
            name: "carol".into(),
            key_sha256: None,
            jwt_subject: Some("carol".into()),
            can: vec![Right::Tasks, Right::Metrics],
            ..ClientConfig::default()
        },
        crate::auth::client("keyed", KEYED, &["*"], &[Right::Tasks]),
    ];
}

fn subject(sub: &str) -> String {
    let rights = json!({ "a2a_agents": ["*"], "a2a_can": ["tasks"] });
    sign(Algorithm::ES256, "ec-1", &claims(sub, rights))
}

#[tokio::test]
async fn each_token_subject_has_a_bucket_of_its_own() {
    let a = agent().await;
    let g = TestGateway::start(&[("a", &a)], token_rates).await;
    g.ready().await;
    let (dave, erin, carol) = (subject("dave"), subject("erin"), subject("carol"));
    // Two at once, the bucket's, with the RateLimit headers of a rate-limited client.
    let first = g.http.get_as("/agents", &dave).await;
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(
        first.header("ratelimit-policy"),
        Some("\"client\";q=2;w=1"),
        "{first:?}"
    );
    assert_eq!(
        create(&g, "a", &dave).await.status,
        202,
        "every route costs"
    );
    // The third: refused, and the agent is not called.
    let tasks = a.task_ids().len();
    let refused = create(&g, "a", &dave).await;
    let err = assert_api_error(&refused, 429, "RATE_LIMITED");
    assert_eq!(refused.header("retry-after"), Some("1"), "{refused:?}");
    assert_eq!(
        refused.header("ratelimit"),
        Some("\"client\";r=0;t=1"),
        "{refused:?}"
    );
    assert_eq!(err["details"]["rate_per_sec"], json!(2.0), "{err}");
    assert_eq!(a.task_ids().len(), tasks, "refused before the agent");
    // Per subject: erin's bucket is her own, full.
    let hers = g.http.get_as("/agents", &erin).await;
    assert_eq!(hers.status, 200, "{hers:?}");
    assert_eq!(
        hers.header("ratelimit"),
        Some("\"client\";r=1;t=1"),
        "{hers:?}"
    );
    // Neither a key client nor a bound token has the subjects' rate: their entries have none.
    for _ in 0..4 {
        let keyed = g.http.get_as("/agents", KEYED).await;
        assert_eq!(keyed.status, 200, "{keyed:?}");
        assert_eq!(keyed.header("ratelimit"), None);
        let bound = g.http.get_as("/agents", &carol).await;
        assert_eq!(bound.status, 200, "{bound:?}");
        assert_eq!(bound.header("ratelimit"), None);
    }
    // Counted under the subjects' one label, never by subject.
    let scraped = g.http.get_as("/metrics", &carol).await;
    let text = String::from_utf8_lossy(&scraped.body);
    assert_eq!(
        metric_value(
            &text,
            "a2a_gateway_rate_limited_total",
            &[("client", "jwt")]
        ),
        1.0,
        "{text}"
    );
    assert!(!text.contains("jwt:dave"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_subject_past_its_rate_is_refused_in_json_rpcs_shape() {
    use a2a_sample_agent::{AgentOptions, SampleAgent};
    use hyper::Method;

    use crate::a2a_gateway::{a2a_agent, gateway};
    use crate::support::a2a_calls::{error_code, message, raw, reason};

    let echo = SampleAgent::start(AgentOptions::a2a("Echo"))
        .await
        .expect("sample agent starts");
    let (_gw, http) = gateway(vec![a2a_agent("echo", &echo.base_url())], token_rates).await;
    // A JSON-RPC call as `token` at `path`: (HTTP status, its headers, the envelope).
    let call = |path: &'static str, token: String, method: &'static str, params: Value| {
        let http = &http;
        async move {
            let auth = format!("Bearer {token}");
            let headers = [
                ("content-type", "application/json"),
                ("a2a-version", "1.0"),
                ("authorization", auth.as_str()),
            ];
            let body = json!({"jsonrpc": "2.0", "id": "c-1", "method": method, "params": params});
            raw(http, Method::POST, path, &headers, &body.to_string()).await
        }
    };
    let (dave, erin) = (subject("dave"), subject("erin"));
    let send = || message("hi", json!({}));
    for _ in 0..2 {
        let (status, _, sent) =
            call("/agents/echo/jsonrpc", dave.clone(), "SendMessage", send()).await;
        assert_eq!(status, 200, "{sent}");
        assert!(sent["result"]["task"]["id"].is_string(), "{sent}");
    }
    // Refused at admission, before the call is read: the form's error, under HTTP 429.
    let (status, r, refused) =
        call("/agents/echo/jsonrpc", dave.clone(), "SendMessage", send()).await;
    assert_eq!(status, 429, "{refused}");
    assert_eq!(error_code(&refused), -32000, "{refused}");
    assert_eq!(reason(&refused), "RATE_LIMITED", "{refused}");
    assert_eq!(r.header("retry-after"), Some("1"), "{r:?}");
    // At the fleet's endpoint too: the bucket is the subject's, whatever the route.
    let tenant = json!({"id": "x", "tenant": "echo"});
    let (status, _, fleet) = call("/a2a", dave.clone(), "GetTask", tenant).await;
    assert_eq!((status, reason(&fleet)), (429, "RATE_LIMITED"), "{fleet}");
    // Another subject is served.
    let (status, _, hers) = call("/agents/echo/jsonrpc", erin, "SendMessage", send()).await;
    assert_eq!(status, 200, "{hers}");
    assert!(hers["result"]["task"]["id"].is_string(), "{hers}");
}
