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

/// A store call that failed, in the gateway's words: which kind of failure, never the
/// server's text (a Redis error names scripts, lines and limits; it is logged where it is
/// classified, [`super::Store::failed`], and no answer carries it). The kinds are the `kind`
/// label of `a2a_gateway_store_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// Redis refused a write: it is at `maxmemory` and evicts nothing (`OOM`).
    #[error("the gateway's store refuses writes (out of memory)")]
    Oom,
    /// Redis refused a write: the node is a replica (`READONLY`), as after a failover.
    #[error("the gateway's store refuses writes (read-only)")]
    ReadOnly,
    /// No answer within the store's timeout.
    #[error("the gateway's store did not answer in time")]
    Timeout,
    /// Anything else: not connected, a broken connection, an error or a reply the gateway
    /// did not expect.
    #[error("the gateway's store is unavailable")]
    Other,
}

impl Failure {
    /// Every kind, in the order of the enum.
    pub const ALL: [Failure; 4] = [
        Failure::Oom,
        Failure::ReadOnly,
        Failure::Timeout,
        Failure::Other,
    ];

    /// The kind of `e`.
    pub fn of(e: &RedisError) -> Failure {
        // A script's failed `redis.call` keeps the command's error code (`OOM command not
        // allowed ... @user_script:22`): the code says it, wherever the write was; in a
        // pipeline, any of its commands' may.
        let codes = e.clone().into_server_errors();
        let said = |code: &str| {
            codes
                .iter()
                .flat_map(|c| c.iter())
                .any(|(_, s)| s.code() == code)
        };
        if said("OOM") {
            Failure::Oom
        } else if said("READONLY") {
            Failure::ReadOnly
        } else if e.is_timeout() {
            Failure::Timeout
        } else {
            Failure::Other
        }
    }

    /// The `kind` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Failure::Oom => "oom",
            Failure::ReadOnly => "readonly",
            Failure::Timeout => "timeout",
            Failure::Other => "other",
        }
    }

    /// Whether Redis answered, refusing writes: the store then stays not ready until a write
    /// succeeds again (see [`super::Store::refusing`]).
    pub fn refuses_writes(self) -> bool {
        matches!(self, Failure::Oom | Failure::ReadOnly)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_counted_under_its_own_label() {
        let labels = Failure::ALL.map(Failure::as_str);
        assert_eq!(labels, crate::metrics::STORE_ERROR_KINDS);
    }

    #[test]
    fn failures_are_classified_by_their_code_never_by_their_text() {
        let server = |text: &str| -> RedisError {
            let mut parser = redis::Parser::new();
            parser
                .parse_value(format!("-{text}\r\n").as_bytes())
                .expect("an error reply")
                .extract_error()
                .expect_err("an error")
        };
        let oom = server("OOM command not allowed when used memory > 'maxmemory'. script: 1f0e, on @user_script:22.");
        assert_eq!(Failure::of(&oom), Failure::Oom);
        let readonly = server("READONLY You can't write against a read only replica.");
        assert_eq!(Failure::of(&readonly), Failure::ReadOnly);
        assert!(Failure::Oom.refuses_writes() && Failure::ReadOnly.refuses_writes());
        let other =
            server("ERR Error running script (call to f_1f0e): @user_script:3: OOM in a string");
        assert_eq!(Failure::of(&other), Failure::Other);
        assert!(!Failure::Other.refuses_writes());
        let timeout = RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert_eq!(Failure::of(&timeout), Failure::Timeout);
        assert!(!Failure::Timeout.refuses_writes());
        // What an answer says is the gateway's: none of the server's words.
        for f in Failure::ALL {
            let said = f.to_string();
            assert!(
                !said.contains("maxmemory") && !said.contains("script"),
                "{said}"
            );
        }
    }
}
