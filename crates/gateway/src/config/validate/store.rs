//! The checks of `[redis]`.

use super::*;

impl Validator {
    pub(super) fn redis(&mut self, r: &RedisConfig) {
        let nodes = r.nodes();
        if nodes.is_empty() {
            self.problem(
                "redis.url",
                "is required in [redis] (or `urls` with `cluster = true`)",
            );
        }
        if !r.urls.is_empty() && !r.cluster {
            self.problem(
                "redis.urls",
                "lists the seed nodes of a cluster: set `cluster = true`, or use `url` for one node",
            );
        }
        let key = |u: &str| {
            if !r.url.is_empty() && u == r.url {
                "redis.url"
            } else {
                "redis.urls"
            }
        };
        for u in &nodes {
            let ok = u.starts_with("redis://")
                || u.starts_with("rediss://")
                || (u.starts_with("unix://") && !r.cluster);
            if !ok {
                let want = if r.cluster {
                    "redis:// or rediss:// (a cluster is reached over TCP)"
                } else {
                    "redis://, rediss:// or unix://"
                };
                self.problem(
                    key(u),
                    format!("{:?} must start with {want}", redact_url(u)),
                );
            } else if let Err(e) = redis::IntoConnectionInfo::into_connection_info(u.as_str()) {
                // The error text never holds the password (redis-rs redacts it); the URL is
                // redacted here.
                self.problem(
                    key(u),
                    format!("{:?} is not a Redis URL: {e}", redact_url(u)),
                );
            }
        }
        let tls = nodes.iter().filter(|u| u.starts_with("rediss://")).count();
        if tls != 0 && tls != nodes.len() {
            self.problem("redis.urls", "mixes rediss:// and redis:// nodes");
        }
        if r.ca_file.is_some() && tls == 0 {
            self.problem("redis.ca_file", "is for rediss:// (TLS) nodes");
        }
        let prefix = r.prefix.as_str();
        if prefix.is_empty() || prefix.len() > 64 {
            self.problem("redis.prefix", "must be 1-64 characters");
        }
        // Redis hashes a key on its first {...}: each partition puts its own hash tag right
        // after the prefix, so the prefix itself must not carry one (`a2a:{gw}:` was the old
        // default; see `[redis] partitions` and the migration note in docs/configuration.md).
        if prefix.contains(['{', '}']) {
            self.problem(
                "redis.prefix",
                format!("{prefix:?} must not contain braces: each partition adds its own {{hash tag}} after the prefix (use e.g. \"a2a:\")"),
            );
        }
        if r.partitions == 0 || r.partitions > super::MAX_PARTITIONS {
            self.problem(
                "redis.partitions",
                format!("must be 1-{}", super::MAX_PARTITIONS),
            );
        }
        // WAIT holds the connection's other commands behind it, and every answer is awaited
        // 2 s at most: a longer wait would turn a slow replica into a broken connection.
        if r.wait_timeout.is_zero() || r.wait_timeout > std::time::Duration::from_millis(1500) {
            self.problem(
                "redis.wait_timeout_ms",
                "must be 1-1500 (0 would wait forever; each Redis answer is awaited 2 s at most)",
            );
        }
    }
}
