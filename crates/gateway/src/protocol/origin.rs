//! Whether a URL an agent wrote names the agent's own address, read as a browser reads it.
//!
//! An agent's address must not reach a client (a client usually cannot reach the agent, and
//! one that can would skip the gateway's auth), so every URL an agent hands out is judged here
//! before it leaves: by the rewrites of file links (Clawpedia's artifacts, A2A's Part URLs), the
//! headers dropped from agents' answers, and the served A2A card.
//!
//! A URL is read as WHATWG reads it (the `url` crate), relative to the agent's configured URL:
//! a path alone, a scheme-relative `//host/x`, backslashes, tabs, upper case, percent-encoded
//! hosts, `127.1` and `0x7f.1`, a trailing dot and the default port all land where a browser
//! lands. Beyond what WHATWG says, the loopback names are one host: an agent on `127.0.0.1`
//! is reached as well at `localhost`, `127.1`, `[::1]` or `0.0.0.0` (Linux routes all of them
//! to the same sockets), so each of those spellings is the agent's too. A URL that cannot be
//! read at all counts as the agent's: the gateway would rather rewrite or refuse it than pass
//! on what a client might resolve to the agent.

use std::net::{Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

/// An agent's configured origin, parsed once.
#[derive(Debug, Clone)]
pub struct Origin {
    base: Url,
}

impl Origin {
    /// The origin of an agent configured at `url` (`None` if it is not an absolute URL).
    pub fn parse(url: &str) -> Option<Origin> {
        let base = Url::parse(url).ok()?;
        base.host()?;
        Some(Origin { base })
    }

    /// Where `url` points if it is on this origin (same scheme, host in any spelling, port):
    /// its path and query, as a request line would carry them; `Some("")` for a URL that
    /// cannot be read. `None` for a URL elsewhere.
    pub fn path_of(&self, url: &str) -> Option<String> {
        let Ok(to) = self.base.join(url.trim()) else {
            return Some(String::new());
        };
        let same = to.scheme() == self.base.scheme()
            && same_host(to.host(), self.base.host())
            && to.port_or_known_default() == self.base.port_or_known_default();
        if !same {
            return None;
        }
        Some(match to.query() {
            Some(q) => format!("{}?{q}", to.path()),
            None => to.path().to_owned(),
        })
    }

    /// Whether `url` names this origin's host, in any spelling, whatever its scheme and port;
    /// a URL with no host (or one that cannot be read) names it too. For what a card names:
    /// a link to the agent's host on another port is still the agent's address.
    pub fn names_host(&self, url: &str) -> bool {
        match Url::parse(url.trim()) {
            Ok(u) => u.host().is_none() || same_host(u.host(), self.base.host()),
            Err(_) => true,
        }
    }

    /// Whether `other`'s host is this origin's host, in any spelling (both absolute URLs).
    pub fn same_host_as(&self, other: &str) -> bool {
        Url::parse(other.trim())
            .ok()
            .is_some_and(|u| u.host().is_some() && same_host(u.host(), self.base.host()))
    }

    /// `scheme://host:port` of the origin, as configured (the base of a request to a path
    /// [`Origin::path_of`] gave).
    pub fn base(&self) -> String {
        let mut o = self.base.clone();
        o.set_path("");
        o.set_query(None);
        o.set_fragment(None);
        let _ = o.set_username("");
        let _ = o.set_password(None);
        o.as_str().trim_end_matches('/').to_owned()
    }
}

/// Whether two hosts are one: equal as WHATWG reads them (a trailing dot aside, an IPv4
/// address written as an IPv4-mapped IPv6 one aside), or both loopback.
fn same_host(a: Option<Host<&str>>, b: Option<Host<&str>>) -> bool {
    let (Some(a), Some(b)) = (a, b) else {
        return false;
    };
    if loopback(&a) && loopback(&b) {
        return true;
    }
    match (&a, &b) {
        (Host::Domain(x), Host::Domain(y)) => x
            .trim_end_matches('.')
            .eq_ignore_ascii_case(y.trim_end_matches('.')),
        (Host::Ipv4(x), Host::Ipv4(y)) => x == y,
        (Host::Ipv6(x), Host::Ipv6(y)) => x == y,
        (Host::Ipv4(v4), Host::Ipv6(v6)) | (Host::Ipv6(v6), Host::Ipv4(v4)) => {
            v6.to_ipv4_mapped() == Some(*v4)
        }
        _ => false,
    }
}

/// `localhost` (and its subdomains), `127.0.0.0/8`, `0.0.0.0`, `::1`, `::` and their
/// IPv4-mapped forms: the names a client on the agent's machine reaches it by.
fn loopback(h: &Host<&str>) -> bool {
    let v4 = |ip: &Ipv4Addr| ip.is_loopback() || ip.is_unspecified();
    match h {
        Host::Domain(d) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
        Host::Ipv4(ip) => v4(ip),
        Host::Ipv6(ip) => {
            ip.is_loopback()
                || ip.is_unspecified()
                || ip.to_ipv4_mapped().is_some_and(|m| v4(&m))
                || *ip == Ipv6Addr::LOCALHOST
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(u: &str) -> Origin {
        Origin::parse(u).expect("an origin")
    }

    #[test]
    fn every_spelling_a_browser_reads_as_the_origin_is_the_origins() {
        let a = origin("http://127.0.0.1:19101");
        for on in [
            "http://127.0.0.1:19101/files/x",
            "HTTP://127.0.0.1:19101/files/x",
            "//127.0.0.1:19101/files/x",
            "/files/x",
            "files/x",
            "http:\\\\127.0.0.1:19101\\files\\x",
            "http://127.1:19101/files/x",
            "http://0x7f.0.0.1:19101/files/x",
            "http://2130706433:19101/files/x",
            "http://0177.0.0.1:19101/files/x",
            "http://%31%32%37.0.0.1:19101/files/x",
            "http://127.0.0.1.:19101/files/x",
            "http://localhost:19101/files/x",
            "http://LOCALHOST.:19101/files/x",
            "http://api.localhost:19101/files/x",
            "http://[::1]:19101/files/x",
            "http://[::ffff:127.0.0.1]:19101/files/x",
            "http://0.0.0.0:19101/files/x",
            "http://127.0.0.2:19101/files/x",
            "http://127.0.0.1:19101\\@evil.example/files/x",
            "ht\ttp://127.0.0.1:19101/files/x",
            "http://user:pw@127.0.0.1:19101/files/x",
            "http://127.0.0.1:019101/files/x",
            "http://127.0.0.1:19101/a b.pdf",
            "  http://127.0.0.1:19101/files/x  ",
        ] {
            assert!(a.path_of(on).is_some(), "{on:?} is the agent's");
        }
        assert_eq!(
            a.path_of("http://localhost:19101/files/../admin?x=1#f")
                .as_deref(),
            Some("/admin?x=1"),
            "dot segments resolved, the fragment never sent"
        );
        for off in [
            "https://bucket.s3.example.com/x?sig=1",
            "http://127.0.0.1:19102/files/x",
            "https://127.0.0.1:19101/files/x",
            "http://evil.example/@127.0.0.1:19101",
            "http://10.0.0.1:19101/files/x",
            "data:text/plain,hello",
            "mailto:ops@example.com",
        ] {
            assert!(a.path_of(off).is_none(), "{off:?} is elsewhere");
        }
        let d = origin("https://agent.example");
        assert!(d.path_of("https://AGENT.example:443/x").is_some());
        assert!(d.path_of("https://agent.example./x").is_some());
        assert!(d.path_of("https://localhost/x").is_none(), "not loopback");
        let v6 = origin("http://[::1]:8000");
        assert!(v6.path_of("http://127.0.0.1:8000/x").is_some());
        let mapped = origin("http://10.0.0.7:8000");
        assert!(mapped.path_of("http://[::ffff:10.0.0.7]:8000/x").is_some());
        assert!(mapped.path_of("http://[::ffff:10.0.0.8]:8000/x").is_none());
    }

    #[test]
    fn a_host_is_named_whatever_the_port_and_scheme() {
        let a = origin("http://127.0.0.1:19101/v1");
        for named in [
            "https://localhost/docs",
            "http://127.1:80/icon.png",
            "not a url",
            "/relative",
            "file:///etc/passwd",
        ] {
            assert!(a.names_host(named), "{named:?}");
        }
        for other in ["https://docs.example.com/", "http://10.0.0.7:19101/"] {
            assert!(!a.names_host(other), "{other:?}");
        }
        assert!(a.same_host_as("http://LOCALHOST:1/rpc"));
        assert!(!a.same_host_as("/rpc"));
        assert_eq!(a.base(), "http://127.0.0.1:19101");
        assert_eq!(
            origin("https://u:p@agent.example:8443/a?b#c").base(),
            "https://agent.example:8443"
        );
        assert!(Origin::parse("not a url").is_none());
    }
}
