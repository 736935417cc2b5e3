//! A real OpenID Connect provider for the `[[auth.oidc]]` tests: node's oidc-provider (OpenID
//! Certified, tests/node/oidc-provider.mjs) on loopback, issuing client-credentials access
//! tokens as JWTs (RFC 9068, `typ: at+jwt`) for the audience `a2a-gateway`, and rotating its
//! signing key on demand.

use std::time::Duration;

use bytes::Bytes;
use hyper::Method;
use serde_json::Value;

use super::child::repo;
use super::{metric_value, wait_for, wait_for_within, Http};

/// The audience the provider's tokens are for.
pub const AUDIENCE: &str = "a2a-gateway";

/// The provider, killed when dropped.
pub struct Idp {
    _child: tokio::process::Child,
    /// `http://127.0.0.1:PORT`: its issuer, where discovery starts.
    pub issuer: String,
    http: Http,
}

impl Idp {
    /// Start it on a port nothing listens on now.
    pub async fn start_anywhere() -> Idp {
        Idp::start(free_port()).await
    }

    /// Start it on `port` and wait until it serves its discovery document.
    pub async fn start(port: u16) -> Idp {
        let child = tokio::process::Command::new("node")
            .arg(repo("tests/node/oidc-provider.mjs"))
            .arg(port.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs the provider");
        let issuer = format!("http://127.0.0.1:{port}");
        let http = Http::new(issuer.clone());
        wait_for_within("the provider serves", Duration::from_secs(20), || async {
            http.try_send(
                Method::GET,
                "/.well-known/openid-configuration",
                &[],
                Bytes::new(),
            )
            .await
            .is_ok_and(|r| r.status == 200)
        })
        .await;
        Idp {
            _child: child,
            issuer,
            http,
        }
    }

    /// A client-credentials access token for the gateway's audience, with the scope `a2a`.
    pub async fn token(&self) -> String {
        self.token_for("a2a").await
    }

    /// A client-credentials access token for the gateway's audience with `scope` (scopes
    /// separated by `+`); `a2a.short` among them makes it live 4 s.
    pub async fn token_for(&self, scope: &str) -> String {
        let body = format!(
            "grant_type=client_credentials&client_id=orchestrator&client_secret=orchestrator-secret\
             &resource=urn:a2a-gateway&scope={scope}"
        );
        let r = self
            .http
            .send(
                Method::POST,
                "/token",
                &[("content-type", "application/x-www-form-urlencoded")],
                Bytes::from(body),
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        r.json()["access_token"]
            .as_str()
            .expect("an access token")
            .to_owned()
    }

    /// Publish a new signing key, withdrawing the old one.
    pub async fn rotate(&self) {
        let r = self
            .http
            .send(Method::POST, "/admin/rotate", &[], Bytes::new())
            .await;
        assert_eq!(r.status, 200, "{r:?}");
    }
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// Part `i` of a JWT (0: the header, 1: the claims), decoded.
fn part(token: &str, i: usize) -> Value {
    use base64::Engine;
    let p = token.split('.').nth(i).expect("a JWT");
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(p)
            .expect("base64url"),
    )
    .expect("json")
}

/// The decoded header of a JWT.
pub fn header(token: &str) -> Value {
    part(token, 0)
}

/// The decoded claims of a JWT (not verified).
pub fn claims(token: &str) -> Value {
    part(token, 1)
}

/// Wait until the gateway at `http` holds the one signing key of its issuer `name`, read from
/// `/metrics` as `metrics_key` (a client with the metrics right).
pub async fn keys_held(http: &Http, name: &str, metrics_key: &str) {
    wait_for("the provider's keys are held", || async {
        let r = http.get_as("/metrics", metrics_key).await;
        let text = String::from_utf8_lossy(&r.body);
        metric_value(&text, "a2a_gateway_jwks_keys", &[("issuer", name)]) == 1.0
    })
    .await;
}
