//! The checks the config cannot make alone: each is a [`Check`] of one value, made by the
//! module that knows it (the webhook URL guard, the retry schedule's limits, signing keys, the
//! JWKS, PEM files) through the one [`Rules`] the crate supplies (`ConfigRules` in lib.rs), so
//! that this module imports none of them. [`NoRules`] makes none: what [`Config::parse`]
//! applies, so the config's own rules can be tested alone.

use super::*;

/// One value the config cannot judge by itself.
#[derive(Debug, Clone, Copy)]
pub enum Check<'a> {
    /// One `webhooks.allow` entry (an address range).
    AllowEntry(&'a str),
    /// The retry waits (`webhooks.retry_schedule_secs` after `max_attempts`).
    RetrySchedule(&'a [u64]),
    /// A subscriber URL, under the allow list.
    SubscriberUrl {
        /// `webhooks.allow`.
        allow: &'a [String],
        /// The URL.
        url: &'a str,
    },
    /// A subscriber signing key.
    SigningSecret(&'a str),
    /// The `[auth.jwt] jwks_file`: readable, and a key set the gateway can use.
    JwksFile(&'a Path),
    /// One `[auth.assertion] key_files` entry: a private key the gateway can sign with.
    AssertionKey(&'a Path),
    /// A PEM file of the `[tls]` table or an agent's `ca_file`: readable, and holding what
    /// the kind says, each item usable.
    PemFile(PemKind, &'a Path),
    /// `[tls] key_file` is the private key of the first certificate in `cert_file` (both
    /// already passed [`Check::PemFile`]).
    KeyPair {
        /// `[tls] cert_file`.
        cert_file: &'a Path,
        /// `[tls] key_file`.
        key_file: &'a Path,
    },
}

/// Why a [`Check`] failed: the error of the module that made it, shown as the problem.
pub type Refused = Box<dyn std::error::Error + Send + Sync>;

/// The checks that need a domain module's knowledge.
pub trait Rules {
    /// Judge one value.
    fn check(&self, what: Check<'_>) -> Result<(), Refused>;
}

/// No domain checks at all (see the module doc).
pub struct NoRules;

impl Rules for NoRules {
    fn check(&self, _: Check<'_>) -> Result<(), Refused> {
        Ok(())
    }
}
