//! TLS, in and out, on rustls with the ring provider.
//!
//! - In: [`Tls`] holds the server config built from `[tls]` behind an [`ArcSwap`]. Each new
//!   connection takes the config current at its accept ([`Tls::accept`], run in the
//!   connection's own task, bounded in time); [`Tls::reload`] swaps in a new one, so new
//!   handshakes get the new certificate while open connections keep theirs. HTTP/1.1 and
//!   HTTP/2 are offered by ALPN. With `client_ca_file`, client certificates are verified
//!   against it (required or optional), and the verified subject ([`subject::rfc4514`]) goes
//!   with the connection to admission.
//! - Out: [`agent_client_config`], the client config of an https agent with its own `ca_file`:
//!   the webpki roots plus that CA (`upstream` uses it for that agent's origin only).
//! - Config checks: [`check_pem`] and [`check_key_pair`], what `check-config` runs for every
//!   file the config names (through `crate::ConfigRules`).

pub mod subject;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::config::{ClientAuth, PemKind, TlsConfig};

/// Largest PEM file read: certificates and keys are a few KiB; a CA bundle well under this.
const MAX_PEM_BYTES: u64 = 1 << 20;

/// What a TLS connection's bytes are read through: the first application bytes are read
/// ahead (see [`Tls::accept`]) and then handed on; writes go straight through. Its buffer is
/// small: hyper reads into its own buffer, and a read at least this large bypasses this one.
pub type TlsIo = BufReader<TlsStream<TcpStream>>;

/// Read-ahead buffer of [`TlsIo`].
const READ_AHEAD: usize = 512;

/// Why a TLS file or config could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// What the operating system answered.
        source: std::io::Error,
    },
    /// The file is larger than any certificate or key file.
    #[error("{path} is over {MAX_PEM_BYTES} bytes: not a PEM certificate or key file")]
    TooLarge {
        /// The file.
        path: String,
    },
    /// The file is not PEM, or holds nothing of what it must.
    #[error("{path}: {why}")]
    Pem {
        /// The file.
        path: String,
        /// What is wrong with it.
        why: String,
    },
    /// The key is not the certificate's.
    #[error("{key} is not the private key of the first certificate in {cert}")]
    KeyMismatch {
        /// The certificate file.
        cert: String,
        /// The key file.
        key: String,
    },
    /// rustls refused the settings.
    #[error("{0}")]
    Rustls(String),
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}

/// The file's bytes, if it is readable and no larger than a PEM file has reason to be.
fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    let err = |source| TlsError::Read {
        path: shown(path),
        source,
    };
    let meta = std::fs::metadata(path).map_err(err)?;
    if meta.len() > MAX_PEM_BYTES {
        return Err(TlsError::TooLarge { path: shown(path) });
    }
    std::fs::read(path).map_err(err)
}

fn pem_error(path: &Path, why: impl Into<String>) -> TlsError {
    TlsError::Pem {
        path: shown(path),
        why: why.into(),
    }
}

/// Every certificate in a PEM file (other sections are skipped), at least one.
fn pem_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(path, format!("not valid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(pem_error(
            path,
            "holds no PEM certificate (BEGIN CERTIFICATE)",
        ));
    }
    Ok(certs)
}

/// A certificate chain: its first certificate (the server's own) must parse as one.
pub fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = pem_certificates(path)?;
    if let Some(first) = certs.first() {
        ParsedCertificate::try_from(first)
            .map_err(|e| pem_error(path, format!("the first certificate is not usable: {e}")))?;
    }
    Ok(certs)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1), one the ring provider can sign with.
pub fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read(path)?;
    let key = PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => pem_error(
            path,
            "holds no unencrypted private key (BEGIN PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY); encrypted keys are not supported",
        ),
        e => pem_error(path, format!("not valid PEM: {e}")),
    })?;
    provider()
        .key_provider
        .load_private_key(key.clone_key())
        .map_err(|e| pem_error(path, format!("the key is not usable: {e}")))?;
    Ok(key)
}

/// CA certificates to trust, each one usable as a trust anchor.
pub fn trust_anchors(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for (i, cert) in pem_certificates(path)?.into_iter().enumerate() {
        roots.add(cert).map_err(|e| {
            pem_error(
                path,
                format!("certificate {} is not a usable CA: {e}", i + 1),
            )
        })?;
    }
    Ok(roots)
}

/// `check-config`'s check of one PEM file.
pub fn check_pem(kind: PemKind, path: &Path) -> Result<(), TlsError> {
    match kind {
        PemKind::CertChain => certificates(path).map(drop),
        PemKind::PrivateKey => private_key(path).map(drop),
        PemKind::TrustAnchors => trust_anchors(path).map(drop),
    }
}

/// `check-config`'s check that the key is the certificate's.
pub fn check_key_pair(cert: &Path, key: &Path) -> Result<(), TlsError> {
    identity(cert, key).map(drop)
}

/// The certificate chain and its key, checked to belong together.
fn identity(
    cert: &Path,
    key: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let chain = certificates(cert)?;
    let key_der = private_key(key)?;
    rustls::sign::CertifiedKey::from_der(chain.clone(), key_der.clone_key(), &provider()).map_err(
        |e| match e {
            rustls::Error::InconsistentKeys(_) => TlsError::KeyMismatch {
                cert: shown(cert),
                key: shown(key),
            },
            e => TlsError::Rustls(format!("{} with {}: {e}", shown(cert), shown(key))),
        },
    )?;
    Ok((chain, key_der))
}

/// The server config `[tls]` describes: its certificate, client certificates verified against
/// `client_ca_file` (required or optional), ALPN `h2` then `http/1.1`.
pub fn server_config(cfg: &TlsConfig) -> Result<ServerConfig, TlsError> {
    let (chain, key) = identity(Path::new(&cfg.cert_file), Path::new(&cfg.key_file))?;
    let provider = provider();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Rustls(e.to_string()))?;
    let builder = match &cfg.client_ca_file {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let roots = Arc::new(trust_anchors(Path::new(ca))?);
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider);
            let verifier = match cfg.client_auth() {
                ClientAuth::Required => verifier,
                ClientAuth::Optional => verifier.allow_unauthenticated(),
            };
            let verifier = verifier
                .build()
                .map_err(|e| TlsError::Rustls(format!("{ca}: {e}")))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Rustls(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// The client config towards an https agent with its own `ca_file`: the webpki roots (what
/// every other agent is checked against) plus that file's CAs; HTTP/2 and HTTP/1.1 by ALPN are
/// set by the connector.
pub fn agent_client_config(ca_file: &Path) -> Result<ClientConfig, TlsError> {
    let mut roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    for anchor in trust_anchors(ca_file)?.roots {
        roots.roots.push(anchor);
    }
    Ok(ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Rustls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// How accepting a TLS connection ended without a connection to serve.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// The handshake failed: not TLS, no common parameters, a client certificate missing
    /// (required) or not verified.
    #[error("TLS handshake failed: {0}")]
    Handshake(std::io::Error),
    /// The handshake and the first request bytes did not come within the limit.
    #[error("no TLS handshake and request within {} s", .0.as_secs())]
    Timeout(Duration),
    /// The client closed the connection after the handshake without a request.
    #[error("closed before a request")]
    Closed,
}

impl Refused {
    /// The `reason` label of `tls_handshake_failures_total`, for a handshake that failed or
    /// timed out (`None`: the handshake was done, the client then closed). From the rustls
    /// error the handshake ended with: ours (what the client sent was refused) or the
    /// client's alert (what we sent was).
    pub fn reason(&self) -> Option<&'static str> {
        let e = match self {
            Refused::Handshake(e) => e,
            Refused::Timeout(_) => return Some("timeout"),
            Refused::Closed => return None,
        };
        let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) else {
            return Some("other");
        };
        Some(match tls {
            rustls::Error::InvalidMessage(_)
            | rustls::Error::InappropriateMessage { .. }
            | rustls::Error::InappropriateHandshakeMessage { .. } => "not_tls",
            rustls::Error::NoCertificatesPresented => "no_client_certificate",
            rustls::Error::InvalidCertificate(_) => "bad_client_certificate",
            rustls::Error::PeerIncompatible(_) | rustls::Error::NoApplicationProtocol => {
                "incompatible"
            }
            rustls::Error::AlertReceived(_) => "alert",
            _ => "other",
        })
    }

    /// The `result` label of `tls_handshakes_total`.
    pub fn label(&self) -> &'static str {
        match self {
            Refused::Handshake(_) => "failed",
            Refused::Timeout(_) => "timeout",
            Refused::Closed => "closed",
        }
    }
}

/// The server side of TLS: the current server config, swapped whole on reload.
pub struct Tls {
    current: ArcSwap<ServerConfig>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").finish_non_exhaustive()
    }
}

impl Tls {
    /// Read and check `[tls]`'s files.
    pub fn load(cfg: &TlsConfig) -> Result<Tls, TlsError> {
        Ok(Tls {
            current: ArcSwap::from_pointee(server_config(cfg)?),
        })
    }

    /// Read `[tls]`'s files again and use them for every handshake from now on; connections
    /// already open keep the certificate they were made with. Files that cannot be used
    /// (unreadable, not PEM, a key that is not the certificate's, a bad CA) change nothing:
    /// the current certificate stays, and the error says why.
    pub fn reload(&self, cfg: &TlsConfig) -> Result<(), TlsError> {
        let fresh = server_config(cfg)?;
        self.current.store(Arc::new(fresh));
        Ok(())
    }

    /// The handshake, then the first bytes of the first request, both within `within`: a
    /// client that stays silent, or stops halfway through its handshake, cannot hold a
    /// connection slot (and hyper's own timeouts start only once it has spoken). Also yields
    /// the subject of the client certificate, verified, if one was presented.
    pub async fn accept(
        &self,
        stream: TcpStream,
        within: Duration,
    ) -> Result<(TlsIo, Option<Arc<str>>), Refused> {
        let acceptor = TlsAcceptor::from(self.current.load_full());
        let work = async {
            let tls = acceptor.accept(stream).await.map_err(Refused::Handshake)?;
            let subject = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .map(|cert| match subject::rfc4514(cert) {
                    Some(s) => Arc::from(s),
                    // Verified by webpki, yet unreadable here: it names no client.
                    None => Arc::from(""),
                });
            let mut io = BufReader::with_capacity(READ_AHEAD, tls);
            match io.fill_buf().await {
                Ok([]) | Err(_) => Err(Refused::Closed),
                Ok(_) => Ok((io, subject)),
            }
        };
        tokio::time::timeout(within, work)
            .await
            .unwrap_or(Err(Refused::Timeout(within)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Files {
        dir: tempfile::TempDir,
    }

    impl Files {
        fn new() -> Files {
            Files {
                dir: tempfile::tempdir().expect("tempdir"),
            }
        }
        fn write(&self, name: &str, text: &str) -> std::path::PathBuf {
            let p = self.dir.path().join(name);
            std::fs::write(&p, text).expect("write");
            p
        }
    }

    fn self_signed(name: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().expect("key");
        let params = rcgen::CertificateParams::new(vec![name.to_owned()]).expect("params");
        let cert = params.self_signed(&key).expect("cert");
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn a_matching_pair_loads_and_a_mismatched_one_is_named() {
        let f = Files::new();
        let (cert, key) = self_signed("localhost");
        let (_, other_key) = self_signed("localhost");
        let cert = f.write("cert.pem", &cert);
        let key = f.write("key.pem", &key);
        let other = f.write("other.pem", &other_key);
        check_key_pair(&cert, &key).expect("pair");
        let cfg = TlsConfig {
            cert_file: cert.display().to_string(),
            key_file: key.display().to_string(),
            ..TlsConfig::default()
        };
        let tls = Tls::load(&cfg).expect("loads");
        let e = check_key_pair(&cert, &other).expect_err("mismatch");
        assert!(e.to_string().contains("is not the private key"), "{e}");
        let broken = TlsConfig {
            key_file: other.display().to_string(),
            ..cfg.clone()
        };
        let e = tls.reload(&broken).expect_err("refused");
        assert!(e.to_string().contains("is not the private key"), "{e}");
        tls.reload(&cfg).expect("a good reload");
    }

    #[test]
    fn each_file_is_checked_for_what_it_must_hold() {
        let f = Files::new();
        let (cert, key) = self_signed("localhost");
        let cert = f.write("cert.pem", &cert);
        let key = f.write("key.pem", &key);
        let junk = f.write("junk.pem", "hello");
        let missing = f.dir.path().join("missing.pem");
        check_pem(PemKind::CertChain, &cert).expect("chain");
        check_pem(PemKind::TrustAnchors, &cert).expect("a self-signed CA");
        check_pem(PemKind::PrivateKey, &key).expect("key");
        let e = check_pem(PemKind::CertChain, &key).expect_err("a key is no cert");
        assert!(e.to_string().contains("holds no PEM certificate"), "{e}");
        let e = check_pem(PemKind::PrivateKey, &cert).expect_err("a cert is no key");
        assert!(e.to_string().contains("no unencrypted private key"), "{e}");
        let e = check_pem(PemKind::TrustAnchors, &junk).expect_err("junk");
        assert!(e.to_string().contains("holds no PEM certificate"), "{e}");
        let e = check_pem(PemKind::CertChain, &missing).expect_err("missing");
        assert!(e.to_string().starts_with("cannot read"), "{e}");
    }

    #[test]
    fn pkcs1_rsa_and_sec1_ec_keys_load_too() {
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tls/testdata");
        for (cert, key) in [
            ("pkcs1-rsa.pem", "pkcs1-rsa.key"),
            ("sec1-ec.pem", "sec1-ec.key"),
        ] {
            let (cert, key) = (data.join(cert), data.join(key));
            check_pem(PemKind::PrivateKey, &key).expect("key");
            check_key_pair(&cert, &key).expect("pair");
        }
        let e = check_key_pair(&data.join("sec1-ec.pem"), &data.join("pkcs1-rsa.key"))
            .expect_err("another key");
        assert!(e.to_string().contains("is not the private key"), "{e}");
    }

    #[test]
    fn an_agent_ca_is_added_to_the_webpki_roots() {
        let f = Files::new();
        let (cert, _) = self_signed("agent.internal");
        let ca = f.write("ca.pem", &cert);
        agent_client_config(&ca).expect("client config");
    }
}
