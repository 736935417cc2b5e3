//! Why a store could not be made or connected.

use redis::RedisError;

/// Why a store could not be made or connected.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// `[redis] ca_file` could not be read.
    #[error("redis.ca_file {path:?}: {source}")]
    CaFile {
        /// The file.
        path: String,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// `[redis]` names no node.
    #[error("[redis] has no url")]
    NoUrl,
    /// The client for the nodes could not be built.
    #[error("[redis] {name}: {source}")]
    Client {
        /// The nodes, passwords redacted.
        name: String,
        /// What redis-rs said.
        source: RedisError,
    },
    /// The data in Redis is refused for good (another layout, another partition count).
    #[error("{0}")]
    Refused(String),
    /// No connection could be made now.
    #[error("cannot connect to Redis at {0}")]
    Unreachable(String),
}
