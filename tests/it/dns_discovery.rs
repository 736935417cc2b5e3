//! Agents' replicas found by DNS (`discover = "dns"`, issue 49) against a real nameserver: a
//! dnsmasq of the test's own, its names changed while the test runs.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use a2a_gateway::registry::dns::{resolve, DnsError};

use crate::support::dnsmasq::Dnsmasq;

const TIMEOUT: Duration = Duration::from_secs(2);

fn addrs(ips: &[&str], port: u16) -> Vec<SocketAddr> {
    ips.iter()
        .map(|ip| SocketAddr::new(ip.parse().expect("an IP"), port))
        .collect()
}

/// Every address of a name, asked of dnsmasq over UDP: a change of the name's addresses is
/// seen at the next resolution (no cache on either side), and an unknown name is an error, not
/// an empty set of replicas.
#[tokio::test]
async fn resolve_asks_the_nameserver_each_time() {
    let dns = Dnsmasq::start();
    let ns = Some(dns.addr);
    let ips = |s: &[&str]| {
        s.iter()
            .map(|ip| ip.parse().expect("an IP"))
            .collect::<Vec<IpAddr>>()
    };

    dns.set("agents.test", &ips(&["127.0.0.3", "127.0.0.2"]));
    let got = resolve("agents.test", 9000, ns, TIMEOUT)
        .await
        .expect("resolved");
    assert_eq!(got, addrs(&["127.0.0.2", "127.0.0.3"], 9000));

    dns.set("agents.test", &ips(&["127.0.0.3", "::1"]));
    let got = resolve("Agents.Test.", 9000, ns, TIMEOUT)
        .await
        .expect("resolved");
    assert_eq!(
        got,
        addrs(&["127.0.0.3", "::1"], 9000),
        "the new set, AAAA included"
    );

    dns.set("agents.test", &ips(&["127.0.0.2"]));
    let got = resolve("agents.test", 9000, ns, TIMEOUT)
        .await
        .expect("resolved");
    assert_eq!(got, addrs(&["127.0.0.2"], 9000), "the change is seen");

    let unknown = resolve("nobody.test", 9000, ns, TIMEOUT).await;
    assert!(matches!(unknown, Err(DnsError::NoSuchName)), "{unknown:?}");
    dns.set("agents.test", &[]);
    let removed = resolve("agents.test", 9000, ns, TIMEOUT).await;
    assert!(matches!(removed, Err(DnsError::NoSuchName)), "{removed:?}");
    let refused = resolve("example.com", 9000, ns, TIMEOUT)
        .await
        .expect_err("no upstream");
    assert_eq!(
        refused.to_string(),
        "the nameserver answered REFUSED (RCODE 5)"
    );
}
