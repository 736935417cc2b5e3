//! The checks the config cannot make alone: [`Rules`], supplied by the modules that know
//! (webhook URLs and keys, the JWKS, PEM files), and [`NoRules`] for the config's own checks.

use super::*;

/// The checks that need a domain module's knowledge, supplied by that module (the webhook
/// module's `ConfigRules`), so that this module imports none. Each returns the message of the
/// problem, if any.
pub trait Rules {
    /// One `webhooks.allow` entry (an address range).
    fn allow_entry(&self, entry: &str) -> Result<(), String>;
    /// The retry waits (`webhooks.retry_schedule_secs` after `max_attempts`).
    fn retry_schedule(&self, secs: &[u64]) -> Result<(), String>;
    /// A subscriber URL, given the allow list.
    fn subscriber_url(&self, allow: &[String], url: &str) -> Result<(), String>;
    /// A subscriber signing key.
    fn signing_secret(&self, secret: &str) -> Result<(), String>;
    /// The `[auth.jwt] jwks_file`: readable, and a key set the gateway can use.
    fn jwks_file(&self, path: &Path) -> Result<(), String>;
    /// A PEM file of the `[tls]` table or an agent's `ca_file`: readable, and holding what
    /// `kind` says, each item usable.
    fn pem_file(&self, kind: PemKind, path: &Path) -> Result<(), String>;
    /// `[tls] key_file` is the private key of the first certificate in `cert_file` (both
    /// already passed [`Rules::pem_file`]).
    fn key_pair(&self, cert_file: &Path, key_file: &Path) -> Result<(), String>;
}

/// Only the config's own rules: what [`Config::parse`] applies.
pub struct NoRules;

impl Rules for NoRules {
    fn allow_entry(&self, _: &str) -> Result<(), String> {
        Ok(())
    }
    fn retry_schedule(&self, _: &[u64]) -> Result<(), String> {
        Ok(())
    }
    fn subscriber_url(&self, _: &[String], _: &str) -> Result<(), String> {
        Ok(())
    }
    fn signing_secret(&self, _: &str) -> Result<(), String> {
        Ok(())
    }
    fn jwks_file(&self, _: &Path) -> Result<(), String> {
        Ok(())
    }
    fn pem_file(&self, _: PemKind, _: &Path) -> Result<(), String> {
        Ok(())
    }
    fn key_pair(&self, _: &Path, _: &Path) -> Result<(), String> {
        Ok(())
    }
}
