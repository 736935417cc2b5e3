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
