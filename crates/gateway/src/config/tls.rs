//! The TLS keys of the config: `[tls]`, and what the PEM files it names must hold.

use super::*;

/// Whether a client certificate is demanded (`[tls] client_auth`, with `client_ca_file`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientAuth {
    /// No certificate, no connection (the default: a CA configured for clients is meant to
    /// keep out whoever has no certificate from it).
    #[default]
    Required,
    /// A connection without a certificate is accepted; it reaches only the routes that need no
    /// credentials unless it brings a bearer credential. A certificate that is sent must verify.
    Optional,
}

/// `[tls]`: the gateway serves HTTPS (HTTP/1.1 and HTTP/2 by ALPN) instead of plaintext.
/// Paths are relative to the config file's directory.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain, the server's certificate first.
    pub cert_file: String,
    /// PEM private key of that certificate: PKCS#8, PKCS#1 (RSA) or SEC1 (EC).
    pub key_file: String,
    /// PEM CA certificates that client certificates are verified against; absent, no client
    /// certificate is asked for.
    pub client_ca_file: Option<String>,
    /// `"required"` or `"optional"`; only with `client_ca_file` (see [`TlsConfig::client_auth`]).
    pub client_auth: Option<ClientAuth>,
}

impl TlsConfig {
    /// Whether a client certificate is demanded: [`ClientAuth::Required`] unless set otherwise.
    pub fn client_auth(&self) -> ClientAuth {
        self.client_auth.unwrap_or_default()
    }
}

/// What a PEM file named in the config holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PemKind {
    /// A certificate chain (`[tls] cert_file`).
    CertChain,
    /// One private key (`[tls] key_file`).
    PrivateKey,
    /// CA certificates to trust (`[tls] client_ca_file`, `[[agents]] ca_file`).
    TrustAnchors,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::testing::*;
    use std::path::Path;

    #[test]
    fn tls_keys_parse_with_their_defaults_and_paths_resolve_against_the_file() {
        let text = format!(
            r#"
            listen = "127.0.0.1:8443"
            [tls]
            cert_file = "server.pem"
            key_file = "/etc/gw/server.key"
            client_ca_file = "ca.pem"
            [[clients]]
            name = "orchestrator-a"
            cert_subject = "CN=orchestrator-a,O=Example"
            [[clients]]
            name = "b"
            key_sha256 = "{HASH}"
            [[agents]]
            name = "secure"
            url = "https://agent.internal:8443"
            ca_file = "agent-ca.pem"
        "#
        );
        let cfg = Config::parse_with_dir(&text, &NoRules, Path::new("/srv/gw")).expect("valid");
        let tls = cfg.tls.as_ref().expect("tls");
        assert_eq!(tls.client_auth(), ClientAuth::Required);
        assert_eq!(tls.cert_file, "/srv/gw/server.pem");
        assert_eq!(tls.key_file, "/etc/gw/server.key");
        assert_eq!(tls.client_ca_file.as_deref(), Some("/srv/gw/ca.pem"));
        assert_eq!(
            cfg.agents[0].ca_file.as_deref(),
            Some("/srv/gw/agent-ca.pem")
        );
        assert_eq!(
            cfg.clients[0].cert_subject.as_deref(),
            Some("CN=orchestrator-a,O=Example")
        );
        let optional = Config::parse(
            "listen = \"127.0.0.1:1\"\n[tls]\ncert_file = \"c\"\nkey_file = \"k\"\nclient_ca_file = \"ca\"\nclient_auth = \"optional\"\n[[agents]]\nname = \"a\"\nurl = \"http://x\"\n",
        )
        .expect("optional");
        assert_eq!(
            optional.tls.map(|t| t.client_auth()),
            Some(ClientAuth::Optional)
        );
    }

    #[test]
    fn tls_problems_are_reported_with_their_keys() {
        let p = Config::parse(
            r#"
            listen = "127.0.0.1:1"
            [tls]
            client_auth = "sometimes"
            [[clients]]
            name = "a"
            cert_subject = "CN=a, O=b"
            [[clients]]
            name = "b"
            cert_subject = "/CN=b"
            [[agents]]
            name = "plain"
            url = "http://x"
            ca_file = "ca.pem"
            [[agents]]
            name = "one"
            url = "https://Agents.internal"
            ca_file = "one.pem"
            [[agents]]
            name = "two"
            url = "https://agents.internal:443/two"
        "#,
        )
        .expect_err("broken");
        let keys: Vec<&str> = p.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "tls.cert_file",
                "tls.key_file",
                "tls.client_auth",
                "agents[0].ca_file",
                "agents[2].ca_file",
                "clients[0].cert_subject",
                "clients[1].cert_subject",
            ],
            "{p:#?}"
        );
        assert!(
            p[5].message.contains("space after a separator"),
            "{}",
            p[5].message
        );
        assert!(p[6].message.contains("OpenSSL"), "{}", p[6].message);

        let p = Config::parse(
            r#"
            listen = "127.0.0.1:1"
            [tls]
            cert_file = "c.pem"
            key_file = "k.pem"
            client_auth = "optional"
            [[clients]]
            name = "a"
            cert_subject = "CN=a"
            [[clients]]
            name = "b"
            cert_subject = "CN=a"
            [[agents]]
            name = "x"
            url = "http://x"
        "#,
        )
        .expect_err("no client CA");
        let keys: Vec<&str> = p.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "tls.client_auth",
                "clients[0].cert_subject",
                "clients[1].cert_subject",
                "clients[1].cert_subject",
            ],
            "{p:#?}"
        );
        assert!(p[1].message.contains("client_ca_file"), "{}", p[1].message);
        assert!(p[3].message.contains("same subject"), "{}", p[3].message);
    }
}
