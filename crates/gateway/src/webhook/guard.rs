//! The outbound URL guard: subscriber URLs come from configuration and admin calls, and the
//! gateway sits inside a network, so without a guard a subscriber URL is a way to make the gateway
//! POST to its own admin port, a database on the private network or the cloud metadata service
//! (server-side request forgery).
//!
//! The check is on the addresses a host *resolves to*, not on its name: a public-looking name can
//! resolve to 127.0.0.1, and `2130706433`, `0x7f.1` or `[::ffff:127.0.0.1]` are 127.0.0.1 too.
//! Every address a name resolves to must pass, since the connector may try any of them.
//!
//! [`UrlGuard::resolve`] returns the addresses it checked, and the caller must connect to exactly
//! those (sending the original host in `Host` and SNI). Resolving again at connect time would let
//! a name with a short TTL answer a public address to the check and a private one to the connect
//! (DNS rebinding). Redirects must not be followed either, since the target of a redirect was
//! never checked; the retry policy counts a 3xx as a failure for that reason.
//!
//! Operators can allow ranges explicitly (`"127.0.0.1/32"`, `"10.0.0.0/8"`), for tests and for
//! subscribers on the private network. Cloud metadata addresses are refused even inside an
//! allowed range, unless an entry names that single address.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use hyper::Uri;

/// An IP network, `addr/prefix`, parsed from config. A bare address means that one address.
/// IPv4-mapped IPv6 networks (`::ffff:10.0.0.0/104`) are stored as their IPv4 form, because
/// addresses are compared in their canonical form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// The network's first address (an entry with host bits set is refused).
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length in bits.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether `ip` lies in this network. Families never match each other; compare canonical
    /// addresses (see [`canonical`]).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = mask32(self.prefix);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = mask128(self.prefix);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }

    /// A network of exactly one address (/32 or /128).
    pub fn is_single(&self) -> bool {
        self.prefix == max_prefix(self.addr)
    }
}

fn max_prefix(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

fn mask32(prefix: u8) -> u32 {
    u32::MAX
        .checked_shl(32 - u32::from(prefix.min(32)))
        .unwrap_or(0)
}

fn mask128(prefix: u8) -> u128 {
    u128::MAX
        .checked_shl(128 - u32::from(prefix.min(128)))
        .unwrap_or(0)
}

impl FromStr for Cidr {
    type Err = GuardError;

    /// Strict on purpose: an allow list entry with host bits set (`10.0.0.1/8`) is most likely a
    /// typo for something narrower, and silently widening it would open more than intended.
    fn from_str(s: &str) -> Result<Cidr, GuardError> {
        let bad = |why: &'static str| GuardError::Cidr {
            entry: s.to_string(),
            why,
        };
        let (addr, prefix) = match s.trim().split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s.trim(), None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| bad("not an IP address"))?;
        let prefix = match prefix {
            None => max_prefix(addr),
            Some(p) => {
                if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(bad("prefix length is not a number"));
                }
                let p: u8 = p.parse().map_err(|_| bad("prefix length is too long"))?;
                if p > max_prefix(addr) {
                    return Err(bad("prefix length is too long"));
                }
                p
            }
        };
        let cidr = match addr {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) if prefix >= 96 => Cidr {
                    addr: IpAddr::V4(v4),
                    prefix: prefix - 96,
                },
                _ => Cidr { addr, prefix },
            },
            IpAddr::V4(_) => Cidr { addr, prefix },
        };
        let host_bits = match cidr.addr {
            IpAddr::V4(a) => u32::from(a) & !mask32(cidr.prefix) != 0,
            IpAddr::V6(a) => u128::from(a) & !mask128(cidr.prefix) != 0,
        };
        if host_bits {
            return Err(bad("address has bits set past the prefix length"));
        }
        Ok(cidr)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// Why an address is not a public one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocked {
    /// A cloud provider's instance metadata service: credentials live there.
    Metadata,
    /// 0.0.0.0 or `::`.
    Unspecified,
    /// 0.0.0.0/8: "this network", reaches the local host on many stacks.
    ThisNetwork,
    /// 127.0.0.0/8 or `::1`.
    Loopback,
    /// RFC 1918, IPv6 unique-local (fc00::/7), deprecated site-local (fec0::/10), local-use
    /// NAT64 (64:ff9b:1::/48).
    Private,
    /// 100.64.0.0/10, carrier-grade NAT: the provider's side of a NAT, not the internet.
    SharedAddress,
    /// 169.254.0.0/16 or fe80::/10.
    LinkLocal,
    /// 192.0.0.0/24 and 2001::/23 (includes Teredo).
    ProtocolAssignment,
    /// The ranges set aside for examples (192.0.2.0/24, 2001:db8::/32...).
    Documentation,
    /// 198.18.0.0/15.
    Benchmarking,
    /// 224.0.0.0/4 or ff00::/8.
    Multicast,
    /// 255.255.255.255.
    Broadcast,
    /// 240.0.0.0/4, and IPv6 outside global unicast 2000::/3 not covered above.
    Reserved,
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Blocked::Metadata => "cloud metadata",
            Blocked::Unspecified => "unspecified",
            Blocked::ThisNetwork => "this-network",
            Blocked::Loopback => "loopback",
            Blocked::Private => "private",
            Blocked::SharedAddress => "shared (carrier-grade NAT)",
            Blocked::LinkLocal => "link-local",
            Blocked::ProtocolAssignment => "IETF protocol assignment",
            Blocked::Documentation => "documentation",
            Blocked::Benchmarking => "benchmarking",
            Blocked::Multicast => "multicast",
            Blocked::Broadcast => "broadcast",
            Blocked::Reserved => "reserved",
        })
    }
}

/// Instance metadata endpoints: AWS/GCP/Azure/OpenStack, AWS ECS task metadata, Oracle Cloud,
/// Alibaba Cloud, AWS over IPv6.
const METADATA: [IpAddr; 5] = [
    IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)),
    IpAddr::V4(Ipv4Addr::new(169, 254, 170, 2)),
    IpAddr::V4(Ipv4Addr::new(192, 0, 0, 192)),
    IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)),
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x254)),
];

/// The address in the form it is compared in: IPv4-mapped IPv6 (`::ffff:a.b.c.d`) is the IPv4
/// address itself, since a dual-stack socket connecting to it reaches exactly that host.
pub fn canonical(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

/// Why `ip` is not a public address, or `None` when it is. Addresses that embed an IPv4 address
/// routed as that address (IPv4-mapped, NAT64 64:ff9b::/96, 6to4 2002::/16) are judged by the
/// embedded address.
pub fn blocked(ip: IpAddr) -> Option<Blocked> {
    match canonical(ip) {
        IpAddr::V4(v4) => blocked_v4(v4),
        IpAddr::V6(v6) => blocked_v6(v6),
    }
}

fn blocked_v4(ip: Ipv4Addr) -> Option<Blocked> {
    let [a, b, c, _] = ip.octets();
    let reason = if METADATA.contains(&IpAddr::V4(ip)) {
        Blocked::Metadata
    } else if ip.is_unspecified() {
        Blocked::Unspecified
    } else if a == 0 {
        Blocked::ThisNetwork
    } else if ip.is_loopback() {
        Blocked::Loopback
    } else if ip.is_private() {
        Blocked::Private
    } else if a == 100 && (b & 0xc0) == 64 {
        Blocked::SharedAddress
    } else if ip.is_link_local() {
        Blocked::LinkLocal
    } else if a == 192 && b == 0 && c == 0 {
        Blocked::ProtocolAssignment
    } else if ip.is_documentation() {
        Blocked::Documentation
    } else if a == 198 && (b & 0xfe) == 18 {
        Blocked::Benchmarking
    } else if ip.is_broadcast() {
        Blocked::Broadcast
    } else if ip.is_multicast() {
        Blocked::Multicast
    } else if a >= 240 {
        Blocked::Reserved
    } else {
        return None;
    };
    Some(reason)
}

fn blocked_v6(ip: Ipv6Addr) -> Option<Blocked> {
    let s = ip.segments();
    let embedded_v4 = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    let reason = if METADATA.contains(&IpAddr::V6(ip)) {
        Blocked::Metadata
    } else if ip.is_unspecified() {
        Blocked::Unspecified
    } else if ip.is_loopback() {
        Blocked::Loopback
    } else if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        // NAT64: the translator forwards to the embedded IPv4 address.
        return blocked_v4(embedded_v4(s[6], s[7]));
    } else if s[0] == 0x2002 {
        // 6to4: the embedded IPv4 address is the tunnel end point.
        return blocked_v4(embedded_v4(s[1], s[2]));
    } else if s[..3] == [0x64, 0xff9b, 1] || (s[0] & 0xfe00) == 0xfc00 || (s[0] & 0xffc0) == 0xfec0
    {
        // Local-use NAT64, unique-local, deprecated site-local.
        Blocked::Private
    } else if (s[0] & 0xffc0) == 0xfe80 {
        Blocked::LinkLocal
    } else if (s[0] & 0xff00) == 0xff00 {
        Blocked::Multicast
    } else if s[..2] == [0x2001, 0x0db8] || (s[0] == 0x3fff && (s[1] & 0xf000) == 0) {
        Blocked::Documentation
    } else if s[0] == 0x2001 && s[1] < 0x0200 {
        Blocked::ProtocolAssignment
    } else if (s[0] & 0xe000) != 0x2000 {
        // Outside global unicast: IPv4-compatible ::/96, discard 100::/64, unassigned space.
        Blocked::Reserved
    } else {
        return None;
    };
    Some(reason)
}

/// Why a subscriber URL or an allow-list entry was refused.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// An allow-list entry that is not `addr/prefix`.
    #[error("invalid allow-list entry {entry:?}: {why}")]
    Cidr {
        /// The entry as configured.
        entry: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A URL that does not parse.
    #[error("invalid URL: {0}")]
    InvalidUrl(String),
    /// A scheme other than http or https.
    #[error("subscriber URL must be http or https")]
    Scheme,
    /// A URL with `user:password@`.
    #[error("subscriber URL must not carry credentials (use auth_header)")]
    UserInfo,
    /// A URL without a host.
    #[error("subscriber URL has no host")]
    NoHost,
    /// A port that is no TCP port: 0, past 65535, or empty (`http://host:/`). Left alone,
    /// `http`'s parser reads 65536 as no port at all, and the delivery would go to port 80.
    #[error("URL port {0:?} is not a port: a port is 1 to 65535")]
    Port(String),
    /// The host name could not be resolved.
    #[error("cannot resolve {host}: {source}")]
    Resolve {
        /// The host name.
        host: String,
        /// What the resolver answered.
        source: std::io::Error,
    },
    /// The host name resolved to nothing.
    #[error("{host} resolves to no address")]
    NoAddress {
        /// The host name.
        host: String,
    },
    /// The host is, or resolves to, an address that is neither public nor allowed.
    #[error(
        "{host} resolves to {addr}, a {reason} address; to deliver there, add a range holding it to the gateway's [webhooks] allow (e.g. allow = [\"{addr}/{}\"])",
        if .addr.is_ipv4() { 32 } else { 128 }
    )]
    Refused {
        /// The host, as the URL names it.
        host: String,
        /// The address refused.
        addr: IpAddr,
        /// Why it is not public.
        reason: Blocked,
    },
}

/// Decides which subscriber URLs and addresses the gateway may deliver to.
#[derive(Debug, Clone, Default)]
pub struct UrlGuard {
    allow: Vec<Cidr>,
}

impl UrlGuard {
    /// A guard with an explicit allow list (config strings like `"127.0.0.1/32"`); empty
    /// allows public addresses only.
    pub fn new<S: AsRef<str>>(allow: &[S]) -> Result<UrlGuard, GuardError> {
        let allow = allow
            .iter()
            .map(|s| s.as_ref().parse())
            .collect::<Result<Vec<Cidr>, _>>()?;
        Ok(UrlGuard { allow })
    }

    /// The allow list, as parsed.
    pub fn allowed(&self) -> &[Cidr] {
        &self.allow
    }

    /// Whether the gateway may connect to `ip`: public, or in the allow list. A metadata address
    /// needs an entry naming that one address, so that allowing a broad range (`0.0.0.0/0`,
    /// `169.254.0.0/16`) for convenience does not hand out cloud credentials.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), Blocked> {
        let ip = canonical(ip);
        let reason = match blocked(ip) {
            None => return Ok(()),
            Some(reason) => reason,
        };
        let allowed = self
            .allow
            .iter()
            .any(|c| c.contains(ip) && (reason != Blocked::Metadata || c.is_single()));
        if allowed {
            Ok(())
        } else {
            Err(reason)
        }
    }

    /// Validate a subscriber URL's form: http or https, no `user:pass@`, a host. A literal IP host
    /// is checked here as well, so a config naming `http://10.0.0.5/` fails at load time; names
    /// are checked at each delivery by [`UrlGuard::resolve`], since what they resolve to changes.
    pub fn check_url(&self, url: &str) -> Result<Uri, GuardError> {
        let uri: Uri = url
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| GuardError::InvalidUrl(e.to_string()))?;
        let (host, _) = self.target(&uri)?;
        if let Ok(ip) = host.parse::<IpAddr>() {
            self.check_ip(ip).map_err(|reason| GuardError::Refused {
                host: host.to_string(),
                addr: ip,
                reason,
            })?;
        }
        Ok(uri)
    }

    /// Resolve the URL's host and check every address; return them with the URL's port.
    ///
    /// The caller connects to these addresses and no others (see the module doc on DNS
    /// rebinding). A literal IP host is checked as is, without a DNS query. A name is resolved with
    /// the system resolver, which has its own timeouts; wrap the call in `tokio::time::timeout` to
    /// bound it tighter.
    pub async fn resolve(&self, uri: &Uri) -> Result<Vec<SocketAddr>, GuardError> {
        let (host, port) = self.target(uri)?;
        self.resolve_host(host, port).await
    }

    /// [`UrlGuard::resolve`] for a host (IPv6 without brackets) and port: what a connector's
    /// resolver calls, so the addresses checked are the addresses connected to.
    pub async fn resolve_host(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, GuardError> {
        let refused = |addr: IpAddr, reason| GuardError::Refused {
            host: host.to_string(),
            addr,
            reason,
        };
        if let Ok(ip) = host.parse::<IpAddr>() {
            self.check_ip(ip).map_err(|r| refused(ip, r))?;
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        let found = tokio::net::lookup_host((host, port))
            .await
            .map_err(|source| GuardError::Resolve {
                host: host.to_string(),
                source,
            })?;
        let mut addrs: Vec<SocketAddr> = Vec::new();
        for addr in found {
            self.check_ip(addr.ip())
                .map_err(|r| refused(addr.ip(), r))?;
            if !addrs.contains(&addr) {
                addrs.push(addr);
            }
        }
        if addrs.is_empty() {
            return Err(GuardError::NoAddress {
                host: host.to_string(),
            });
        }
        Ok(addrs)
    }

    /// Host (IPv6 without brackets) and port (the scheme's default when absent) of a URL that
    /// has an allowed form.
    fn target<'u>(&self, uri: &'u Uri) -> Result<(&'u str, u16), GuardError> {
        let default_port = match uri.scheme_str() {
            Some(s) if s.eq_ignore_ascii_case("http") => 80,
            Some(s) if s.eq_ignore_ascii_case("https") => 443,
            _ => return Err(GuardError::Scheme),
        };
        let authority = uri.authority().ok_or(GuardError::NoHost)?;
        if authority.as_str().contains('@') {
            return Err(GuardError::UserInfo);
        }
        let host = authority.host();
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if host.is_empty() {
            return Err(GuardError::NoHost);
        }
        // What follows the host (no user info here) is the port, if anything: read here, not
        // by `port_u16`, which takes an unparsable port for none.
        let port = match authority.as_str()[authority.host().len()..].strip_prefix(':') {
            None => default_port,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| GuardError::Port(p.to_owned()))?,
        };
        Ok((host, port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn guard(allow: &[&str]) -> UrlGuard {
        UrlGuard::new(allow).unwrap()
    }

    #[test]
    fn every_non_public_ipv4_range_is_blocked_with_its_reason() {
        use Blocked::*;
        let cases = [
            ("0.0.0.0", Unspecified),
            ("0.1.2.3", ThisNetwork),
            ("0.255.255.255", ThisNetwork),
            ("127.0.0.1", Loopback),
            ("127.255.255.254", Loopback),
            ("10.0.0.0", Private),
            ("10.255.255.255", Private),
            ("172.16.0.1", Private),
            ("172.31.255.255", Private),
            ("192.168.0.1", Private),
            ("192.168.255.255", Private),
            ("100.64.0.1", SharedAddress),
            ("100.127.255.255", SharedAddress),
            ("169.254.0.1", LinkLocal),
            ("169.254.255.255", LinkLocal),
            ("169.254.169.254", Metadata),
            ("169.254.170.2", Metadata),
            ("100.100.100.200", Metadata),
            ("192.0.0.192", Metadata),
            ("192.0.0.8", ProtocolAssignment),
            ("192.0.2.1", Documentation),
            ("198.51.100.7", Documentation),
            ("203.0.113.255", Documentation),
            ("198.18.0.1", Benchmarking),
            ("198.19.255.255", Benchmarking),
            ("224.0.0.1", Multicast),
            ("239.255.255.255", Multicast),
            ("240.0.0.1", Reserved),
            ("255.255.255.254", Reserved),
            ("255.255.255.255", Broadcast),
        ];
        for (addr, reason) in cases {
            assert_eq!(blocked(ip(addr)), Some(reason), "{addr}");
        }
    }

    #[test]
    fn public_ipv4_next_to_the_ranges_is_allowed() {
        for addr in [
            "1.1.1.1",
            "8.8.8.8",
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "169.253.255.255",
            "169.255.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.1.0",
            "192.167.255.255",
            "192.169.0.0",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
        ] {
            assert_eq!(blocked(ip(addr)), None, "{addr}");
        }
    }

    #[test]
    fn every_non_public_ipv6_range_is_blocked_with_its_reason() {
        use Blocked::*;
        let cases = [
            ("::", Unspecified),
            ("::1", Loopback),
            ("fc00::1", Private),
            ("fdff:ffff::1", Private),
            ("fec0::1", Private),
            ("64:ff9b:1::1", Private),
            ("fe80::1", LinkLocal),
            ("febf::1", LinkLocal),
            ("fd00:ec2::254", Metadata),
            ("ff02::1", Multicast),
            ("ff0e::1", Multicast),
            ("2001:db8::1", Documentation),
            ("3fff::1", Documentation),
            ("3fff:fff::1", Documentation),
            ("2001::1", ProtocolAssignment),   // Teredo
            ("2001:2::1", ProtocolAssignment), // benchmarking
            ("2001:1ff::1", ProtocolAssignment),
            ("::127.0.0.1", Reserved), // IPv4-compatible, deprecated
            ("::8.8.8.8", Reserved),
            ("100::1", Reserved),
            ("4000::1", Reserved),
        ];
        for (addr, reason) in cases {
            assert_eq!(blocked(ip(addr)), Some(reason), "{addr}");
        }
    }

    #[test]
    fn public_ipv6_is_allowed() {
        for addr in [
            "2606:4700:4700::1111",
            "2001:4860:4860::8888",
            "2001:200::1",
            "2001:db9::1",
            "3fff:1000::1",
            "3ffe::1",
            "2000::1",
        ] {
            assert_eq!(blocked(ip(addr)), None, "{addr}");
        }
    }

    #[test]
    fn embedded_ipv4_is_judged_by_the_embedded_address() {
        use Blocked::*;
        let cases = [
            ("::ffff:127.0.0.1", Some(Loopback)),
            ("::ffff:7f00:1", Some(Loopback)),
            ("::ffff:10.1.2.3", Some(Private)),
            ("::ffff:169.254.169.254", Some(Metadata)),
            ("::ffff:0.0.0.0", Some(Unspecified)),
            ("::ffff:8.8.8.8", None),
            ("64:ff9b::127.0.0.1", Some(Loopback)),
            ("64:ff9b::a00:1", Some(Private)),
            ("64:ff9b::169.254.169.254", Some(Metadata)),
            ("64:ff9b::100.64.0.1", Some(SharedAddress)),
            ("64:ff9b::8.8.8.8", None),
            ("2002:7f00:1::1", Some(Loopback)),
            ("2002:c0a8:101::1", Some(Private)),
            ("2002:808:808::1", None),
        ];
        for (addr, want) in cases {
            assert_eq!(blocked(ip(addr)), want, "{addr}");
        }
    }

    #[test]
    fn cidr_parses_networks_and_single_addresses() {
        let c: Cidr = "10.0.0.0/8".parse().unwrap();
        assert_eq!((c.addr(), c.prefix()), (ip("10.0.0.0"), 8));
        assert!(c.contains(ip("10.255.0.1")));
        assert!(!c.contains(ip("11.0.0.0")));
        assert!(
            !c.contains(ip("::ffff:10.0.0.1")),
            "compare canonical forms"
        );
        let c: Cidr = "127.0.0.1".parse().unwrap();
        assert_eq!(c.to_string(), "127.0.0.1/32");
        assert!(c.is_single());
        assert!(!c.contains(ip("127.0.0.2")));
        let c: Cidr = " fd00::/8 ".parse().unwrap();
        assert!(c.contains(ip("fdab::1")));
        assert!(!c.contains(ip("fc00::1")));
        assert!(!c.contains(ip("10.0.0.1")), "families never match");
        let c: Cidr = "::1/128".parse().unwrap();
        assert!(c.is_single() && c.contains(ip("::1")));
    }

    #[test]
    fn cidr_zero_prefix_matches_its_whole_family() {
        let c: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(c.contains(ip("255.255.255.255")) && c.contains(ip("0.0.0.0")));
        assert!(!c.contains(ip("::1")));
        let c: Cidr = "::/0".parse().unwrap();
        assert!(c.contains(ip("ffff::1")));
    }

    #[test]
    fn cidr_stores_mapped_networks_as_ipv4() {
        let c: Cidr = "::ffff:10.0.0.0/104".parse().unwrap();
        assert_eq!(c.to_string(), "10.0.0.0/8");
        let c: Cidr = "::ffff:127.0.0.1".parse().unwrap();
        assert_eq!(c.to_string(), "127.0.0.1/32");
    }

    #[test]
    fn cidr_refuses_malformed_entries() {
        for bad in [
            "",
            "/8",
            "10.0.0.0/",
            "10.0.0.0/33",
            "::/129",
            "10.0.0.0/-1",
            "10.0.0.0/+8",
            "10.0.0.0/8/8",
            "10.0.0.0/ 8",
            "10.0.0.0/999999999999",
            "10.0.0/8",
            "localhost/32",
            "10.0.0.1/8", // host bits set
            "fe80::1/10",
        ] {
            assert!(
                matches!(bad.parse::<Cidr>(), Err(GuardError::Cidr { .. })),
                "{bad:?}"
            );
        }
        assert!(UrlGuard::new(&["127.0.0.1/32", "nonsense"]).is_err());
    }

    #[test]
    fn allow_list_opens_exactly_its_ranges() {
        let g = guard(&["127.0.0.1/32", "10.0.0.0/8", "fd12::/16"]);
        assert_eq!(g.check_ip(ip("127.0.0.1")), Ok(()));
        assert_eq!(g.check_ip(ip("::ffff:127.0.0.1")), Ok(()), "mapped form");
        assert_eq!(g.check_ip(ip("127.0.0.2")), Err(Blocked::Loopback));
        assert_eq!(g.check_ip(ip("::1")), Err(Blocked::Loopback));
        assert_eq!(g.check_ip(ip("10.20.30.40")), Ok(()));
        assert_eq!(g.check_ip(ip("192.168.1.1")), Err(Blocked::Private));
        assert_eq!(g.check_ip(ip("fd12:3456::1")), Ok(()));
        assert_eq!(g.check_ip(ip("fd13::1")), Err(Blocked::Private));
        assert_eq!(g.check_ip(ip("8.8.8.8")), Ok(()), "public stays allowed");
        // NAT64 goes through a translator: allowing 127.0.0.1 does not allow 64:ff9b::7f00:1.
        assert_eq!(g.check_ip(ip("64:ff9b::127.0.0.1")), Err(Blocked::Loopback));
    }

    #[test]
    fn default_guard_allows_public_only() {
        let g = UrlGuard::default();
        assert!(g.allowed().is_empty());
        assert_eq!(g.check_ip(ip("127.0.0.1")), Err(Blocked::Loopback));
        assert_eq!(g.check_ip(ip("93.184.216.34")), Ok(()));
    }

    #[test]
    fn metadata_needs_an_entry_naming_it() {
        let broad = guard(&["0.0.0.0/0", "169.254.0.0/16", "::/0", "100.64.0.0/10"]);
        assert_eq!(broad.check_ip(ip("169.254.1.1")), Ok(()));
        assert_eq!(broad.check_ip(ip("10.0.0.1")), Ok(()));
        for m in [
            "169.254.169.254",
            "::ffff:169.254.169.254",
            "100.100.100.200",
            "fd00:ec2::254",
        ] {
            assert_eq!(broad.check_ip(ip(m)), Err(Blocked::Metadata), "{m}");
        }
        let exact = guard(&["169.254.169.254/32", "fd00:ec2::254"]);
        assert_eq!(exact.check_ip(ip("169.254.169.254")), Ok(()));
        assert_eq!(exact.check_ip(ip("fd00:ec2::254")), Ok(()));
        assert_eq!(exact.check_ip(ip("169.254.170.2")), Err(Blocked::Metadata));
    }

    #[test]
    fn check_url_accepts_http_and_https() {
        let g = UrlGuard::default();
        for url in [
            "http://example.com/hook",
            "https://example.com",
            "HTTPS://Example.com:8443/a?b=c",
            "http://8.8.8.8:8080/x",
            "http://[2606:4700:4700::1111]/x",
        ] {
            assert!(g.check_url(url).is_ok(), "{url}");
        }
    }

    #[test]
    fn check_url_refuses_bad_forms() {
        let g = UrlGuard::default();
        assert!(matches!(
            g.check_url("ftp://example.com/"),
            Err(GuardError::Scheme)
        ));
        assert!(matches!(
            g.check_url("file:///etc/passwd"),
            Err(GuardError::Scheme | GuardError::InvalidUrl(_))
        ));
        assert!(matches!(
            g.check_url("example.com/hook"),
            Err(GuardError::Scheme | GuardError::InvalidUrl(_))
        ));
        assert!(matches!(g.check_url("/hook"), Err(GuardError::Scheme)));
        assert!(matches!(
            g.check_url("http://user:pw@example.com/"),
            Err(GuardError::UserInfo)
        ));
        assert!(matches!(
            g.check_url("http://user@example.com/"),
            Err(GuardError::UserInfo)
        ));
        assert!(matches!(
            g.check_url("http://example.com@127.0.0.1/"),
            Err(GuardError::UserInfo)
        ));
        assert!(matches!(
            g.check_url("http://exa mple.com/"),
            Err(GuardError::InvalidUrl(_))
        ));
        assert!(g.check_url("").is_err());
    }

    #[test]
    fn ports_are_1_to_65535() {
        let g = UrlGuard::default();
        for (url, port) in [
            ("http://example.com:1/", 1),
            ("https://example.com:65535/x", 65535),
            ("http://[2606:4700:4700::1111]:8443/x", 8443),
            ("http://[2606:4700:4700::1111]/x", 80),
            ("https://example.com/", 443),
        ] {
            let uri = g.check_url(url).unwrap_or_else(|e| panic!("{url}: {e}"));
            assert_eq!(g.target(&uri).map(|t| t.1).ok(), Some(port), "{url}");
        }
        for (url, port) in [
            ("http://example.com:0/hook", "0"),
            ("http://example.com:65536/hook", "65536"),
            ("https://8.8.8.8:99999/", "99999"),
            ("http://[2606:4700:4700::1111]:0/x", "0"),
        ] {
            match g.check_url(url) {
                Err(GuardError::Port(p)) => assert_eq!(p, port, "{url}"),
                other => panic!("{url}: {other:?}"),
            }
        }
        let e = g
            .check_url("http://example.com:65536/")
            .expect_err("refused");
        assert_eq!(
            e.to_string(),
            "URL port \"65536\" is not a port: a port is 1 to 65535"
        );
    }

    #[test]
    fn check_url_refuses_literal_non_public_hosts() {
        let g = UrlGuard::default();
        for (url, want) in [
            ("http://127.0.0.1:8080/", Blocked::Loopback),
            ("http://[::1]/", Blocked::Loopback),
            ("http://[::ffff:127.0.0.1]/", Blocked::Loopback),
            ("http://[::ffff:7f00:1]/", Blocked::Loopback),
            (
                "https://169.254.169.254/latest/meta-data/",
                Blocked::Metadata,
            ),
            ("http://[fd00:ec2::254]/", Blocked::Metadata),
            ("http://10.0.0.5/", Blocked::Private),
            ("http://0.0.0.0/", Blocked::Unspecified),
        ] {
            match g.check_url(url) {
                Err(GuardError::Refused { reason, .. }) => assert_eq!(reason, want, "{url}"),
                other => panic!("{url}: {other:?}"),
            }
        }
        assert!(guard(&["127.0.0.1/32"])
            .check_url("http://127.0.0.1:9/")
            .is_ok());
    }

    /// A literal host resolves without DNS: the future completes on its first poll, outside any
    /// runtime (tokio's `lookup_host` would need one).
    #[test]
    fn literal_hosts_resolve_without_dns() {
        let g = guard(&["127.0.0.1/32"]);
        let cases = [
            ("http://127.0.0.1:8080/x", "127.0.0.1:8080"),
            ("http://127.0.0.1/x", "127.0.0.1:80"),
            ("https://8.8.8.8/x", "8.8.8.8:443"),
            (
                "https://[2606:4700:4700::1111]:8443/",
                "[2606:4700:4700::1111]:8443",
            ),
        ];
        for (url, want) in cases {
            let uri = g.check_url(url).unwrap();
            let got = g.resolve(&uri).now_or_never().expect("no DNS query");
            assert_eq!(got.unwrap(), vec![want.parse::<SocketAddr>().unwrap()]);
        }
        let uri: Uri = "http://[::1]:80/".parse().unwrap();
        let got = g.resolve(&uri).now_or_never().expect("no DNS query");
        assert!(matches!(
            got,
            Err(GuardError::Refused {
                reason: Blocked::Loopback,
                ..
            })
        ));
    }

    #[test]
    fn resolve_rechecks_the_form_of_any_uri() {
        let g = UrlGuard::default();
        let uri: Uri = "ftp://8.8.8.8/".parse().unwrap();
        assert!(matches!(
            g.resolve(&uri).now_or_never(),
            Some(Err(GuardError::Scheme))
        ));
        let uri: Uri = "http://u@8.8.8.8/".parse().unwrap();
        assert!(matches!(
            g.resolve(&uri).now_or_never(),
            Some(Err(GuardError::UserInfo))
        ));
    }

    #[tokio::test]
    async fn names_are_refused_when_they_resolve_to_loopback() {
        let uri = UrlGuard::default()
            .check_url("http://localhost:8080/hook")
            .unwrap();
        match UrlGuard::default().resolve(&uri).await {
            Err(e @ GuardError::Refused { .. }) => {
                // The refusal says where to allow it, with a range that would.
                let text = e.to_string();
                let GuardError::Refused { host, reason, addr } = e else {
                    unreachable!()
                };
                assert_eq!(host, "localhost");
                assert_eq!(reason, Blocked::Loopback);
                let range = if addr.is_ipv4() { "/32" } else { "/128" };
                assert!(
                    text.contains("[webhooks] allow")
                        && text.contains(&format!("\"{addr}{range}\"")),
                    "{text}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn names_resolve_to_checked_addresses_when_allowed() {
        let g = guard(&["127.0.0.1/32", "::1/128"]);
        let uri = g.check_url("http://localhost:8080/hook").unwrap();
        let addrs = g.resolve(&uri).await.unwrap();
        assert!(!addrs.is_empty());
        for a in &addrs {
            assert!(a.ip().is_loopback(), "{a}");
            assert_eq!(a.port(), 8080);
        }
        let mut dedup = addrs.clone();
        dedup.dedup();
        assert_eq!(dedup.len(), addrs.len());
    }

    #[tokio::test]
    async fn one_refused_address_refuses_the_name() {
        // localhost may resolve to both 127.0.0.1 and ::1; allowing only one family must refuse
        // whenever the other one is among the answers.
        let g = guard(&["127.0.0.1/32"]);
        let uri = g.check_url("http://localhost/").unwrap();
        let all: Vec<SocketAddr> = tokio::net::lookup_host(("localhost", 80))
            .await
            .unwrap()
            .collect();
        let result = g.resolve(&uri).await;
        if all.iter().any(|a| a.ip() == ip("::1")) {
            assert!(matches!(result, Err(GuardError::Refused { .. })));
        } else {
            assert_eq!(result.unwrap(), vec!["127.0.0.1:80".parse().unwrap()]);
        }
    }

    #[tokio::test]
    async fn numeric_forms_of_loopback_never_pass() {
        // getaddrinfo may read these as 127.0.0.1 (inet_aton) or fail; either way, no delivery.
        let g = UrlGuard::default();
        for url in ["http://2130706433/", "http://0x7f000001/", "http://127.1/"] {
            if let Ok(uri) = g.check_url(url) {
                let got = g.resolve(&uri).await;
                assert!(
                    matches!(
                        got,
                        Err(GuardError::Refused {
                            reason: Blocked::Loopback,
                            ..
                        } | GuardError::Resolve { .. })
                    ),
                    "{url}: {got:?}"
                );
            }
        }
    }
}
