//! `[redis]`: where replicas share their state (see the store module).

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use super::{de, redact_url};

/// The most partitions a keyspace may have (`[redis] partitions`): every replica's workers poll
/// every partition's stream.
pub const MAX_PARTITIONS: u16 = 1024;

/// `[redis]`.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RedisConfig {
    /// One node: `redis://[user:password@]host:port[/db]`, `rediss://` for TLS, or `unix://`.
    /// May carry a password: never printed (see the Debug impl).
    pub url: String,
    /// A file holding `url` (with its password), read at start; a change needs a restart.
    pub url_file: Option<String>,
    /// Redis Cluster: the client learns the slot map from these seed nodes, follows MOVED and
    /// ASK, and refreshes the map when the cluster changes.
    pub cluster: bool,
    /// The seed nodes of a cluster (`url`, if set, is one more).
    pub urls: Vec<String>,
    /// A PEM file of CA certificates that `rediss://` servers are checked against, besides the
    /// system roots (a managed Redis with a private CA).
    pub ca_file: Option<String>,
    /// Prepended to every key. No braces: each partition adds its own `{hash tag}`.
    pub prefix: String,
    /// Tasks, their webhook lanes and the delivery streams are split over this many
    /// partitions (hash of task_id mod P), each one hash tag, so each atomic step touches one
    /// cluster slot and the partitions spread over the masters. Fixed for the life of the data.
    pub partitions: u16,
    /// Above 0: every ledger write waits (`WAIT`) for this many replicas to have it before the
    /// gateway answers; with AOF `appendfsync always` an acknowledged change then survives a
    /// failover.
    pub wait_replicas: u32,
    /// How long a write waits for `wait_replicas`; past it the write counts as failed.
    #[serde(deserialize_with = "de::millis")]
    #[serde(rename = "wait_timeout_ms")]
    pub wait_timeout: Duration,
}

impl Default for RedisConfig {
    fn default() -> RedisConfig {
        RedisConfig {
            url: String::new(),
            url_file: None,
            cluster: false,
            urls: Vec::new(),
            ca_file: None,
            prefix: "a2a:".into(),
            partitions: 16,
            wait_replicas: 0,
            wait_timeout: Duration::from_millis(1000),
        }
    }
}

impl RedisConfig {
    /// Every node named: `url` first, then `urls`.
    pub fn nodes(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::with_capacity(self.urls.len() + 1);
        if !self.url.is_empty() {
            out.push(self.url.clone());
        }
        out.extend(self.urls.iter().cloned());
        out
    }
}

impl fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let urls: Vec<String> = self.urls.iter().map(|u| redact_url(u)).collect();
        f.debug_struct("RedisConfig")
            .field("url", &redact_url(&self.url))
            .field("cluster", &self.cluster)
            .field("urls", &urls)
            .field("ca_file", &self.ca_file)
            .field("prefix", &self.prefix)
            .field("partitions", &self.partitions)
            .field("wait_replicas", &self.wait_replicas)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use crate::config::*;

    #[test]
    fn redis_urls_prefixes_and_cluster_keys_are_checked() {
        let base = "listen = \"127.0.0.1:1\"\n[[agents]]\nname=\"a\"\nurl=\"http://x\"\n[redis]\n";
        let keys_of = |toml: &str| -> Vec<String> {
            Config::parse(&format!("{base}{toml}"))
                .expect_err(toml)
                .into_iter()
                .map(|p| p.key)
                .collect()
        };
        // Braces in the prefix: each partition puts its own hash tag after it.
        assert_eq!(
            keys_of("url = \"redis://h\"\nprefix = \"a2a:{gw}:\"\n"),
            ["redis.prefix"]
        );
        assert_eq!(
            keys_of("url = \"redis://h\"\nprefix = \"\"\n"),
            ["redis.prefix"]
        );
        assert_eq!(keys_of("url = \"http://h\"\n"), ["redis.url"]);
        assert_eq!(
            keys_of("url = \"redis://h\"\npartitions = 0\n"),
            ["redis.partitions"]
        );
        assert_eq!(
            keys_of("url = \"redis://h\"\npartitions = 5000\n"),
            ["redis.partitions"]
        );
        // Seed nodes without `cluster = true`, a unix socket for a cluster, mixed TLS.
        assert_eq!(
            keys_of("urls = [\"redis://a\", \"redis://b\"]\n"),
            ["redis.urls"]
        );
        assert_eq!(
            keys_of("cluster = true\nurls = [\"unix:///tmp/r.sock\"]\n"),
            ["redis.urls"]
        );
        assert_eq!(
            keys_of("cluster = true\nurls = [\"rediss://a\", \"redis://b\"]\n"),
            ["redis.urls"]
        );
        assert_eq!(
            keys_of("url = \"redis://h\"\nca_file = \"/ca.pem\"\n"),
            ["redis.ca_file"]
        );
        assert_eq!(keys_of("cluster = true\n"), ["redis.url"]);
        // Every problem in one pass.
        assert_eq!(
            keys_of("url = \"redis://h\"\nprefix = \"{x}\"\npartitions = 0\n"),
            ["redis.prefix", "redis.partitions"]
        );
        let ok = Config::parse(&format!(
            "{base}url = \"rediss://gw:pw@h:6380\"\nca_file = \"/ca.pem\"\nwait_replicas = 1\n"
        ))
        .expect("tls with a user");
        let r = ok.redis.expect("redis");
        assert_eq!(
            (r.prefix.as_str(), r.partitions, r.wait_replicas),
            ("a2a:", 16, 1)
        );
        assert!(!format!("{r:?}").contains("pw"), "{r:?}");
        let ok = Config::parse(&format!(
            "{base}cluster = true\nurls = [\"redis://:pw@a:7000\", \"redis://:pw@b:7001\"]\n"
        ))
        .expect("cluster");
        let r = ok.redis.expect("redis");
        assert_eq!(r.nodes().len(), 2);
        assert!(!format!("{r:?}").contains("pw"), "{r:?}");
        // A unix socket's password rides in the query string.
        let ok = Config::parse(&format!("{base}url = \"unix:///run/r.sock?pass=pw9\"\n"))
            .expect("unix socket");
        assert!(!format!("{:?}", ok.redis).contains("pw9"));
        // A bound each partition can hold, and a WAIT shorter than an answer's timeout.
        assert_eq!(
            keys_of("url = \"redis://h\"\n[webhooks]\nmax_queued = 100\n"),
            ["webhooks.max_queued"]
        );
        assert_eq!(
            keys_of("url = \"redis://h\"\nwait_replicas = 1\nwait_timeout_ms = 5000\n"),
            ["redis.wait_timeout_ms"]
        );
    }
}
