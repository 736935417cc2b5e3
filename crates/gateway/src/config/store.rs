//! `[redis]`: where replicas share their state (see `crate::store`).

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
