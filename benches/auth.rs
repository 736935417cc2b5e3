//! What admission's authentication costs per request: an API key (SHA-256 of the presented key,
//! looked up among the clients' hashes with constant-time equality), with 1 and with 100
//! clients; a JWT of each accepted algorithm verified (signature, `iss`, `aud`, `exp`, `nbf`:
//! `jwt_verify_*`, what the first request with a token costs), and a JWT seen before
//! (`jwt_remembered`, every later request with it).
//!
//! Group `token_keys` (issue 48): `Auth::authenticate` of a bearer JWT whose keys come from a
//! JWKS file (`[auth.jwt]`, `file_*`) beside one whose keys the gateway fetched by URL
//! (`[[auth.oidc]]`, `url_*`: discovery and JWKS served by a loopback HTTP server started here,
//! the keys fetched by the gateway's own fetcher before measuring), ES256 and RS256, each a
//! first verification (`*_first`: every token new to the gateway, its cache emptied by a reload
//! between batches, outside the timing) and a token seen before (`*_cached`).
//!
//!     cargo bench --bench auth
//!     cargo bench --bench auth -- token_keys    # the file/URL group only
//!
//! The end-to-end cost (CPU µs per create through the gateway, with a key or a JWT) is measured
//! by `AUTH=key` / `AUTH=jwt` / `AUTH=oidc bash benches/load/run.sh`; see benches/load/README.md.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_gateway::auth::jwt::Verifier;
use a2a_gateway::auth::Auth;
use a2a_gateway::config::{
    AgentConfig, ClientConfig, Config, JwtConfig, OidcConfig, Right, ScopeRights,
};
use a2a_gateway::metrics::Metrics;
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

fn config(clients: usize) -> Config {
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
    cfg
}

fn auth(clients: usize) -> Auth {
    Auth::from_config(&config(clients)).expect("auth")
}

fn jwt_config() -> JwtConfig {
    JwtConfig {
        jwks_file: fixture("jwks.json").to_string_lossy().into_owned(),
        issuer: FILE_ISSUER.into(),
        audience: "a2a-gateway".into(),
        ..JwtConfig::default()
    }
}

const FILE_ISSUER: &str = "https://idp.example.test/";

fn signing_key(alg: Algorithm) -> (EncodingKey, &'static str) {
    let (pem, kid) = match alg {
        Algorithm::RS256 => ("rsa.pem", "rsa-1"),
        Algorithm::ES256 => ("ec.pem", "ec-1"),
        _ => ("ed25519.pem", "ed-1"),
    };
    let pem = std::fs::read(fixture(pem)).expect("key");
    let key = match alg {
        Algorithm::RS256 => EncodingKey::from_rsa_pem(&pem),
        Algorithm::ES256 => EncodingKey::from_ec_pem(&pem),
        _ => EncodingKey::from_ed_pem(&pem),
    }
    .expect("key");
    (key, kid)
}

/// A token of `iss` signed with the fixture key of `alg`; `jti` makes each one new.
fn signed(alg: Algorithm, iss: &str, jti: u64) -> String {
    let (key, kid) = signing_key(alg);
    signed_with(&key, kid, alg, iss, jti)
}

fn signed_with(key: &EncodingKey, kid: &str, alg: Algorithm, iss: &str, jti: u64) -> String {
    let mut header = Header::new(alg);
    header.kid = Some(kid.into());
    let claims = serde_json::json!({
        "sub": "bench", "iss": iss, "aud": "a2a-gateway", "jti": format!("bench-{jti}"),
        "scope": "a2a.send", "a2a_agents": ["*"], "a2a_can": ["tasks"],
        "exp": chrono::Utc::now().timestamp() + 86_400,
    });
    encode(&header, &claims, key).expect("token")
}

fn token(alg: Algorithm) -> String {
    signed(alg, FILE_ISSUER, 0)
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
    for (name, alg) in [
        ("jwt_verify_rs256", Algorithm::RS256),
        ("jwt_verify_es256", Algorithm::ES256),
        ("jwt_verify_eddsa", Algorithm::EdDSA),
    ] {
        let t = token(alg);
        g.bench_function(name, |b| b.iter(|| verifier.verify(&t).expect("valid")));
    }
    let t = token(Algorithm::RS256);
    g.bench_function("jwt_remembered", |b| {
        b.iter(|| one.authenticate(t.as_bytes()).expect("valid"))
    });
    g.finish();
}

/// A loopback identity provider: the discovery document and the fixture JWKS over HTTP/1.1,
/// one request per connection, on a thread of its own for the rest of the process. Its issuer.
fn serve_idp() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let issuer = format!("http://{}", listener.local_addr().expect("addr"));
    let discovery =
        serde_json::json!({"issuer": issuer, "jwks_uri": format!("{issuer}/jwks.json")})
            .to_string();
    let jwks = std::fs::read_to_string(fixture("jwks.json")).expect("jwks");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let head = String::from_utf8_lossy(&head);
            let path = head.split_whitespace().nth(1).unwrap_or("");
            let (status, body) = match path {
                "/.well-known/openid-configuration" => ("200 OK", discovery.as_str()),
                "/jwks.json" => ("200 OK", jwks.as_str()),
                _ => ("404 Not Found", ""),
            };
            let _ = write!(
                s,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    issuer
}

/// Tokens signed per batch of first verifications: the cache is emptied (a reload, untimed)
/// every this many.
const FRESH: usize = 256;

fn token_keys(c: &mut Criterion) {
    // `[[auth.oidc]]`: keys by URL, fetched by the gateway's fetcher on a runtime of its own.
    let issuer = serve_idp();
    let mut url_cfg = config(1);
    url_cfg.auth.jwt = None;
    url_cfg.auth.oidc = vec![OidcConfig {
        name: "corp".into(),
        issuer: issuer.clone(),
        audience: "a2a-gateway".into(),
        scopes: [(
            "a2a.send".to_owned(),
            ScopeRights {
                can: vec![Right::Tasks],
                ..ScopeRights::default()
            },
        )]
        .into(),
        ..OidcConfig::default()
    }];
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let url = Auth::from_config(&url_cfg).expect("auth");
    {
        let _in = rt.enter();
        url.start_oidc(&Arc::new(Metrics::new().expect("metrics")));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !url.degraded().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the loopback keys were not fetched"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // `[auth.jwt]`: keys from the same JWKS, as a file.
    let file_cfg = config(1);
    let file = Auth::from_config(&file_cfg).expect("auth");

    let mut g = c.benchmark_group("token_keys");
    for (alg, name) in [(Algorithm::ES256, "es256"), (Algorithm::RS256, "rs256")] {
        let (key, kid) = signing_key(alg);
        for (source, auth, cfg, iss) in [
            ("file", &file, &file_cfg, FILE_ISSUER),
            ("url", &url, &url_cfg, issuer.as_str()),
        ] {
            let fresh: Vec<String> = (0..FRESH as u64)
                .map(|j| signed_with(&key, kid, alg, iss, j + 1))
                .collect();
            // First verification: FRESH tokens the gateway has not seen, then a reload (which
            // keeps an issuer's keys held and forgets the tokens verified), untimed.
            g.bench_function(format!("{source}_{name}_first"), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    let mut left = iters;
                    while left > 0 {
                        let n = left.min(FRESH as u64) as usize;
                        let a = auth.reloaded(cfg).expect("reloaded");
                        let start = Instant::now();
                        for t in &fresh[..n] {
                            std::hint::black_box(a.authenticate(t.as_bytes()).expect("valid"));
                        }
                        total += start.elapsed();
                        left -= n as u64;
                    }
                    total
                })
            });
            // The same token again: remembered until its exp.
            let t = signed_with(&key, kid, alg, iss, 0);
            auth.authenticate(t.as_bytes()).expect("valid");
            g.bench_function(format!("{source}_{name}_cached"), |b| {
                b.iter(|| auth.authenticate(t.as_bytes()).expect("valid"))
            });
        }
    }
    g.finish();
    drop(rt);
}

criterion_group!(benches, bench, token_keys);
criterion_main!(benches);
