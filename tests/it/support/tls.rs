//! TLS for the tests: a CA of the test's own (rcgen, made at test time), the server and client
//! certificates it signs, files to point a config at, clients that trust the CA and present a
//! certificate, and a TLS terminator to put in front of a plaintext sample agent.

use std::net::SocketAddr;
use std::sync::Arc;

use a2a_gateway::config::{ClientAuth, TlsConfig};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::{TcpListener, TcpStream};

/// A certificate authority made for one test.
pub struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

/// A certificate signed by a [`Ca`], with its key.
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
    pub der: CertificateDer<'static>,
}

impl Leaf {
    /// The private key, as rustls takes it.
    pub fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).expect("a PEM key")
    }
}

fn name(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn
}

impl Ca {
    pub fn new(cn: &str) -> Ca {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.distinguished_name = name(cn);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).expect("CA certificate");
        Ca { cert, key }
    }

    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    fn sign(&self, mut params: CertificateParams, usage: ExtendedKeyUsagePurpose) -> Leaf {
        let key = KeyPair::generate().expect("leaf key");
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![usage];
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("leaf certificate");
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
        }
    }

    /// A server certificate for `127.0.0.1` and `localhost`.
    pub fn server(&self) -> Leaf {
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".into()])
            .expect("server params");
        params.distinguished_name = name("a2a-gateway test server");
        self.sign(params, ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// A client certificate whose subject is `dn` (type, value), first RDN first.
    pub fn client(&self, dn: &[(DnType, &str)]) -> Leaf {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("client params");
        let mut name = DistinguishedName::new();
        for (t, v) in dn {
            name.push(t.clone(), *v);
        }
        params.distinguished_name = name;
        self.sign(params, ExtendedKeyUsagePurpose::ClientAuth)
    }
}

/// A directory for a test's PEM files.
pub struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    pub fn new() -> Files {
        Files {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// Write `text` to `name`; its path.
    pub fn write(&self, name: &str, text: &str) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).expect("write");
        p.display().to_string()
    }

    /// `[tls]` with `leaf` as the server certificate (files `{tag}.pem`, `{tag}.key`) and, with
    /// `clients`, client certificates verified against that CA.
    pub fn tls(&self, tag: &str, leaf: &Leaf, clients: Option<(&Ca, ClientAuth)>) -> TlsConfig {
        TlsConfig {
            cert_file: self.write(&format!("{tag}.pem"), &leaf.cert_pem),
            key_file: self.write(&format!("{tag}.key"), &leaf.key_pem),
            client_ca_file: clients.map(|(ca, _)| self.write("client-ca.pem", &ca.pem())),
            client_auth: clients.map(|(_, auth)| auth),
        }
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A client config that trusts `ca`, presents `identity` if given, and offers `alpn`.
pub fn client_config(ca: &Ca, identity: Option<&Leaf>, alpn: &[&[u8]]) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.cert.der().clone()).expect("CA root");
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots);
    let mut config = match identity {
        Some(leaf) => builder
            .with_client_auth_cert(vec![leaf.der.clone()], leaf.key())
            .expect("client certificate"),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config
}

/// One TLS connection to `addr` (the server name `127.0.0.1`).
pub async fn connect(
    addr: SocketAddr,
    config: rustls::ClientConfig,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::IpAddress(addr.ip().into());
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
}

/// The certificate the server presented on `tls`.
pub fn peer_certificate(
    tls: &tokio_rustls::client::TlsStream<TcpStream>,
) -> CertificateDer<'static> {
    tls.get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .expect("a server certificate")
        .clone()
        .into_owned()
}

/// Terminate TLS with `leaf` on a fresh loopback port and pass the bytes on to `backend` (a
/// plaintext sample agent): an https agent. Runs until the test's runtime ends.
pub async fn terminator(leaf: &Leaf, backend: SocketAddr) -> SocketAddr {
    let key = leaf.key();
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der.clone()], key)
        .expect("server config");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Ok(mut plain) = TcpStream::connect(backend).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    addr
}
