//! The names discovered replicas' TLS is verified by. A replica found by DNS
//! (`discover = "dns"`) is called at its address (`https://10.0.0.5:443/...`: each replica its
//! own pool of connections, so a pinned call reaches that replica), but its certificate names
//! the configured name, not the address: the handshake sends and verifies that name (SNI).
//!
//! One table for the process, read when a connection is made (never per request), written by
//! the replicas' keeper as DNS answers change (`http::replicas`).

use std::collections::HashMap;
use std::sync::OnceLock;

use arc_swap::ArcSwap;
use hyper::Uri;
use hyper_rustls::ResolveServerName;
use rustls::pki_types::ServerName;

/// Address (`host:port`, lower case, as `registry::replicas::address_of` writes it) to the name
/// its certificate is verified against.
type Table = HashMap<String, ServerName<'static>>;

fn table() -> &'static ArcSwap<Table> {
    static NAMES: OnceLock<ArcSwap<Table>> = OnceLock::new();
    NAMES.get_or_init(|| ArcSwap::from_pointee(Table::new()))
}

/// Verify the replica at `address` as `name` from now on (`None`: by its address again).
pub fn set(address: &str, name: Option<&str>) {
    let name = name.and_then(|n| ServerName::try_from(n.to_owned()).ok());
    table().rcu(|t| {
        let mut next = Table::clone(t);
        match &name {
            Some(n) => next.insert(address.to_owned(), n.clone()),
            None => next.remove(address),
        };
        next
    });
}

/// The name a discovered replica at `uri`'s address is verified by, if it is one.
pub fn name_of(uri: &Uri) -> Option<String> {
    let t = table().load();
    if t.is_empty() {
        return None;
    }
    let key = format!(
        "{}:{}",
        uri.host()?.to_ascii_lowercase(),
        uri.port_u16().unwrap_or(443)
    );
    match t.get(&key)? {
        ServerName::DnsName(n) => Some(n.as_ref().to_owned()),
        _ => None,
    }
}

/// The resolver of the agents' connectors: the table's name for a discovered replica's
/// address, else the URI's host (hyper-rustls's default).
#[derive(Clone, Default)]
pub struct Names;

impl ResolveServerName for Names {
    fn resolve(
        &self,
        uri: &Uri,
    ) -> Result<ServerName<'static>, Box<dyn std::error::Error + Sync + Send>> {
        let host = uri.host().unwrap_or_default();
        let t = table().load();
        if !t.is_empty() {
            let port = uri.port_u16().unwrap_or(443);
            let key = format!("{}:{port}", host.to_ascii_lowercase());
            if let Some(name) = t.get(&key) {
                return Ok(name.clone());
            }
        }
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        ServerName::try_from(bare.to_owned()).map_err(|e| Box::new(e) as _)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_discovered_address_is_verified_by_its_name() {
        let uri: Uri = "https://10.9.8.7:8443/a2a".parse().expect("uri");
        let name = |u: &Uri| Names.resolve(u).expect("a name");
        let named = |n: &str| ServerName::try_from(n.to_owned()).expect("a server name");
        assert_eq!(name(&uri), named("10.9.8.7"));
        set("10.9.8.7:8443", Some("agents.example"));
        assert_eq!(name(&uri), named("agents.example"));
        assert_eq!(name_of(&uri).as_deref(), Some("agents.example"));
        let other: Uri = "https://10.9.8.7:9443/".parse().expect("uri");
        assert_eq!(
            name(&other),
            named("10.9.8.7"),
            "another port is another replica"
        );
        set("10.9.8.7:8443", None);
        assert_eq!(name(&uri), named("10.9.8.7"));
        let v6: Uri = "https://[::1]:443/".parse().expect("uri");
        assert_eq!(name(&v6), named("::1"));
    }
}
