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
    /// `[[clients]]` entries added, changed and removed, by name.
    pub clients: Changes,
    /// `[[subscribers]]` added, changed and removed, by name.
    pub subscribers: Changes,
}

/// Entries of a named list that a reload added, changed or removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Names new to the config.
    pub added: Vec<String>,
    /// Names whose entry differs.
    pub changed: Vec<String>,
    /// Names no longer in the config.
    pub removed: Vec<String>,
}

impl Changes {
    /// What differs between `old` and `new`, entries matched by `name`.
    pub fn between<T: PartialEq>(old: &[T], new: &[T], name: impl Fn(&T) -> &str) -> Changes {
        let find = |list: &[T], n: &str| list.iter().position(|e| name(e) == n);
        let mut out = Changes::default();
        for e in new {
            match find(old, name(e)) {
                None => out.added.push(name(e).to_owned()),
                Some(i) if old[i] != *e => out.changed.push(name(e).to_owned()),
                Some(_) => {}
            }
        }
        out.removed = old
            .iter()
            .filter(|e| find(new, name(e)).is_none())
            .map(|e| name(e).to_owned())
            .collect();
        out
    }
}

/// Why a reload was refused; nothing of it was applied.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The `[auth.jwt]` key set cannot be used.
    #[error("[auth.jwt] {0}")]
    Jwks(#[from] crate::auth::jwt::JwksError),
    /// An `[auth.assertion]` key cannot be used.
    #[error(transparent)]
    Assertion(#[from] crate::caller::KeyError),
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

#[cfg(test)]
mod tests {
    use super::Changes;

    #[test]
    fn changes_name_what_was_added_changed_and_removed() {
        let old = [("a", 1), ("b", 2), ("c", 3)];
        let new = [("b", 2), ("c", 4), ("d", 5)];
        let c = Changes::between(&old, &new, |e| e.0);
        assert_eq!(c.added, ["d"]);
        assert_eq!(c.changed, ["c"]);
        assert_eq!(c.removed, ["a"]);
        assert_eq!(Changes::between(&old, &old, |e| e.0), Changes::default());
    }
}
