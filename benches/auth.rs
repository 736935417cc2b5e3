//! What admission's authentication costs per request: an API key (SHA-256 of the presented key,
//! looked up among the clients' hashes with constant-time equality), with 1 and with 100
//! clients; a JWT of each accepted algorithm verified (signature, `iss`, `aud`, `exp`, `nbf`:
//! `jwt_verify_*`, what the first request with a token costs), and a JWT seen before
//! (`jwt_remembered`, every later request with it).
//!
//!     cargo bench --bench auth
//!
//! The end-to-end cost (CPU µs per create through the gateway, with a key or a JWT) is measured
//! by `AUTH=key` / `AUTH=jwt bash benches/load/run.sh`; see benches/load/README.md.

use std::path::PathBuf;

use a2a_gateway::auth::jwt::Verifier;
use a2a_gateway::auth::Auth;
use a2a_gateway::config::{AgentConfig, ClientConfig, Config, JwtConfig};
use criterion::{criterion_group, criterion_main, Criterion};
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use sha2::{Digest, Sha256};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/jwt")
        .join(name)
}

fn sha(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn auth(clients: usize) -> Auth {
    let mut cfg = Config::with_agents(
        "127.0.0.1:0".parse().expect("addr"),
        vec![AgentConfig::new("a", "http://127.0.0.1:1")],
    );
    cfg.clients = (0..clients)
        .map(|i| ClientConfig {
            name: format!("client-{i}"),
            key_sha256: Some(sha(&format!("key-{i}-0123456789abcdef"))),
            ..ClientConfig::default()
        })
        .collect();
    cfg.auth.jwt = Some(jwt_config());
    Auth::from_config(&cfg).expect("auth")
}

fn jwt_config() -> JwtConfig {
    JwtConfig {
        jwks_file: fixture("jwks.json").to_string_lossy().into_owned(),
        issuer: "https://idp.example.test/".into(),
        audience: "a2a-gateway".into(),
        ..JwtConfig::default()
    }
}

fn token(alg: Algorithm, kid: &str, pem: &str) -> String {
    let pem = std::fs::read(fixture(pem)).expect("key");
    let key = match alg {
        Algorithm::RS256 => EncodingKey::from_rsa_pem(&pem),
        Algorithm::ES256 => EncodingKey::from_ec_pem(&pem),
        _ => EncodingKey::from_ed_pem(&pem),
    }
    .expect("key");
    let mut header = Header::new(alg);
    header.kid = Some(kid.into());
    let claims = serde_json::json!({
        "sub": "bench", "iss": "https://idp.example.test/", "aud": "a2a-gateway",
        "a2a_agents": ["*"], "a2a_can": ["tasks"],
        "exp": chrono::Utc::now().timestamp() + 86_400,
    });
    encode(&header, &claims, &key).expect("token")
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("authenticate");
    let one = auth(1);
    let hundred = auth(100);
    let last_key = b"key-99-0123456789abcdef";
    g.bench_function("api_key_1_client", |b| {
        b.iter(|| one.authenticate(b"key-0-0123456789abcdef").expect("known"))
    });
    g.bench_function("api_key_100_clients", |b| {
        b.iter(|| hundred.authenticate(last_key).expect("known"))
    });
    g.bench_function("api_key_unknown_100_clients", |b| {
        b.iter(|| {
            hundred
                .authenticate(b"nobody-0123456789abcdef")
                .expect_err("unknown")
        })
    });
    let verifier = Verifier::load(&jwt_config()).expect("verifier");
    for (name, alg, kid, pem) in [
        ("jwt_verify_rs256", Algorithm::RS256, "rsa-1", "rsa.pem"),
        ("jwt_verify_es256", Algorithm::ES256, "ec-1", "ec.pem"),
        ("jwt_verify_eddsa", Algorithm::EdDSA, "ed-1", "ed25519.pem"),
    ] {
        let t = token(alg, kid, pem);
        g.bench_function(name, |b| b.iter(|| verifier.verify(&t).expect("valid")));
    }
    let t = token(Algorithm::RS256, "rsa-1", "rsa.pem");
    g.bench_function("jwt_remembered", |b| {
        b.iter(|| one.authenticate(t.as_bytes()).expect("valid"))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
