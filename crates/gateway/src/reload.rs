//! What a reload reports: what it did ([`Reloaded`]), or why it was refused
//! ([`ReloadError`]). The reload itself is `lifecycle.rs`'s.

/// What a reload did.
#[derive(Debug, Default)]
pub struct Reloaded {
    /// Keys that changed but need a restart (`listen`, `workers`, `[redis]`...): the running
    /// gateway keeps their old values.
    pub need_restart: Vec<&'static str>,
    /// Agents added, changed and removed, by route name.
    pub agents_added: Vec<String>,
    /// Agents whose entry changed (they start over: new card, streams ended with a retry hint).
    pub agents_changed: Vec<String>,
    /// Agents no longer configured (their streams ended with a final event).
    pub agents_removed: Vec<String>,
}

/// Why a reload was refused; nothing of it was applied.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The `[auth.jwt]` key set cannot be used.
    #[error("[auth.jwt] {0}")]
    Jwks(#[from] crate::auth::jwt::JwksError),
    /// A subscriber's URL or key cannot be used.
    #[error(transparent)]
    Webhooks(#[from] crate::webhook::send::SenderError),
    /// The retry schedule cannot be used.
    #[error("webhooks: {0}")]
    Schedule(#[from] crate::webhook::retry::ScheduleError),
    /// A client towards agents could not be built (an agent's `ca_file`).
    #[error(transparent)]
    Client(#[from] crate::upstream::ClientError),
    /// The `[tls]` files cannot be used (the running certificate keeps serving).
    #[error("[tls] {0}")]
    Tls(#[from] crate::tls::TlsError),
    /// The gateway was started without `[tls]`.
    #[error("[tls]: the gateway was started without TLS; serving TLS needs a restart")]
    TlsOff,
}
