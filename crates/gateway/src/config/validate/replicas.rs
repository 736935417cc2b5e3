//! The checks of an agent's replicas: `[[agents]] urls`, `discover`, `discover_interval_ms`,
//! `replica_grace_ms`, `max_replicas`, and `[discovery] nameserver`.

use super::*;

/// At most this many `urls` (`max_replicas` bounds discovered ones too).
const MAX_URLS: usize = 1024;

impl Validator {
    pub(super) fn replicas(&mut self, c: &Config) {
        if let Some(ns) = &c.discovery.nameserver {
            if ns.parse::<SocketAddr>().is_err() {
                self.problem(
                    "discovery.nameserver",
                    format!("{ns:?} must be an IP address and port, such as \"10.0.0.10:53\""),
                );
            }
        }
        for (i, a) in c.agents.iter().enumerate() {
            let at = format!("agents[{i}]");
            self.agent_replicas(a, &at);
        }
    }

    fn agent_replicas(&mut self, a: &AgentConfig, at: &str) {
        if !a.urls.is_empty() && a.url != a.urls[0] {
            self.problem(
                format!("{at}.urls"),
                "lists the agent's replicas instead of url: give one of url and urls",
            );
        }
        if a.urls.len() > MAX_URLS {
            self.problem(
                format!("{at}.urls"),
                format!("lists {} replicas; at most {MAX_URLS}", a.urls.len()),
            );
        }
        let mut seen = HashSet::new();
        for (j, u) in a.urls.iter().enumerate() {
            if let Err(e) = check_agent_url(u) {
                self.problem(format!("{at}.urls[{j}]"), e);
                continue;
            }
            match crate::registry::replicas::address_of(u) {
                Some(addr) if !seen.insert(addr.clone()) => self.problem(
                    format!("{at}.urls[{j}]"),
                    format!("names replica {addr} twice: a replica is one host:port"),
                ),
                _ => {}
            }
            if path_of(u) != path_of(&a.url) || scheme_of(u) != scheme_of(&a.url) {
                self.problem(
                    format!("{at}.urls[{j}]"),
                    "must have the scheme and path of urls[0]: replicas are one agent, served alike",
                );
            }
        }
        if a.max_replicas == 0 {
            self.problem(format!("{at}.max_replicas"), "must be at least 1");
        }
        if a.discover.is_some() {
            if !a.urls.is_empty() {
                self.problem(
                    format!("{at}.discover"),
                    "resolves url's host to the replicas: give url, not urls",
                );
            }
            if a.discover_interval < Duration::from_millis(100) {
                self.problem(format!("{at}.discover_interval_ms"), "must be at least 100");
            }
            if a.grpc_url.is_some() {
                self.problem(
                    format!("{at}.grpc_url"),
                    "is one address: an agent with discovered replicas is called on each replica's own address",
                );
            }
        }
        if !a.urls.is_empty() && a.grpc_url.is_some() && a.urls.len() > 1 {
            self.problem(
                format!("{at}.grpc_url"),
                "is one address: an agent with replicas is called on each replica's own host, at its card's gRPC port",
            );
        }
    }
}

fn scheme_of(u: &str) -> Option<String> {
    u.parse::<hyper::Uri>()
        .ok()
        .and_then(|u| u.scheme_str().map(str::to_owned))
}

fn path_of(u: &str) -> String {
    u.parse::<hyper::Uri>()
        .map(|u| u.path().trim_end_matches('/').to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn problems(agent: &str) -> Vec<String> {
        let text = format!("listen = \"127.0.0.1:0\"\n[[agents]]\nname = \"a\"\n{agent}");
        match Config::parse(&text) {
            Ok(_) => Vec::new(),
            Err(p) => p.into_iter().map(|p| p.to_string()).collect(),
        }
    }

    #[test]
    fn urls_stand_for_url() {
        let text = "listen = \"127.0.0.1:0\"\n[[agents]]\nname = \"a\"\nurls = [\"http://a-1:9000/x/\", \"http://a-2:9000/x\"]\n";
        let cfg = Config::parse(text).expect("valid");
        assert_eq!(cfg.agents[0].url, "http://a-1:9000/x");
        assert_eq!(cfg.agents[0].base_urls().len(), 2);
        assert!(cfg.agents[0].pins());
    }

    #[test]
    fn bad_replicas_are_named() {
        let p = problems("url = \"http://a:1\"\nurls = [\"http://b:1\"]\n");
        assert!(p.iter().any(|p| p.contains("agents[0].urls")), "{p:?}");
        let p = problems("urls = [\"http://b:1\", \"http://B:1/\"]\n");
        assert!(p.iter().any(|p| p.contains("twice")), "{p:?}");
        let p = problems("urls = [\"http://b:1/x\", \"http://c:1/y\"]\n");
        assert!(p.iter().any(|p| p.contains("urls[1]")), "{p:?}");
        let p = problems("urls = [\"http://b:1\", \"ftp://c:1\"]\n");
        assert!(p.iter().any(|p| p.contains("urls[1]")), "{p:?}");
        let p = problems("url = \"http://b:1\"\ndiscover = \"dns\"\ndiscover_interval_ms = 5\n");
        assert!(
            p.iter().any(|p| p.contains("discover_interval_ms")),
            "{p:?}"
        );
        let p = problems("url = \"http://b:1\"\nmax_replicas = 0\n");
        assert!(p.iter().any(|p| p.contains("max_replicas")), "{p:?}");
        let text = "listen = \"127.0.0.1:0\"\n[discovery]\nnameserver = \"dns.local\"\n";
        let p = Config::parse(text).err().unwrap_or_default();
        assert!(
            p.iter()
                .any(|p| p.to_string().contains("discovery.nameserver")),
            "{p:?}"
        );
    }
}
