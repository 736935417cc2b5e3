//! Official A2A context claims in the Redis ledger ([`context.lua`](../context.lua)): a hash per
//! claim and a zset of each owner's claims, both in the context's partition, so one script
//! judges and counts atomically; a client's count is summed over the partitions, as its live
//! tasks are. The bound is checked before a new claim is made, so concurrent messages of one
//! client may pass it by as many as it sends at once; another client's are never refused for
//! it.

use std::time::Duration;

use super::{millis, now_ms, RedisLedger, LIVE_TTL};
use crate::ledger::{ContextClaim, ContextHold, LedgerError};

impl RedisLedger {
    /// The claim's key and the owner's zset, in the context's partition.
    fn context_keys(&self, agent: &str, context: &str, owner: &str) -> (String, String) {
        let keys = &self.store.keys;
        let name = format!("{agent}\n{context}");
        let part = keys.part(keys.of(&name));
        (
            format!("{part}ctx:{agent}:{context}"),
            format!("{part}ctxo:{owner}"),
        )
    }

    async fn context_script(
        &self,
        agent: &str,
        context: &str,
        owner: &str,
        args: &[&[u8]],
    ) -> Result<String, LedgerError> {
        let (claim, owned) = self.context_keys(agent, context, owner);
        let now = now_ms().to_string();
        let mut all: Vec<&[u8]> = Vec::with_capacity(args.len() + 2);
        all.push(args[0]);
        all.extend([owner.as_bytes(), now.as_bytes()]);
        all.extend_from_slice(&args[1..]);
        self.run_script(&self.context, &[&claim, &owned], &all)
            .await
    }

    pub(super) async fn claim_context_inner(
        &self,
        agent: &str,
        context: &str,
        owner: &str,
        how: ContextHold,
        max: Option<u64>,
    ) -> Result<ContextClaim, LedgerError> {
        let (mode, d): (&[u8], Duration) = match how {
            ContextHold::Hold(d) => (b"hold", d),
            ContextHold::Keep(d) => (b"keep", d),
        };
        let ms = millis(d).to_string();
        let claim = |create: &'static [u8]| {
            let ms = ms.clone();
            async move {
                self.context_script(
                    agent,
                    context,
                    owner,
                    &[b"claim", mode, ms.as_bytes(), create],
                )
                .await
            }
        };
        let mut found = claim(if max.is_some() { b"0" } else { b"1" }).await?;
        if found == "absent" {
            if let Some(limit) = max {
                if self.contexts_of_inner(owner).await? >= limit {
                    return Err(LedgerError::TooManyContexts { limit });
                }
            }
            found = claim(b"1").await?;
        }
        match found.as_str() {
            "claimed" => Ok(ContextClaim::Claimed),
            "owned" => Ok(ContextClaim::Owned),
            "other" => Ok(ContextClaim::Other),
            _ => Err(super::bad_reply("context")),
        }
    }

    pub(super) async fn drop_context_inner(
        &self,
        agent: &str,
        context: &str,
        owner: &str,
    ) -> Result<(), LedgerError> {
        self.context_script(agent, context, owner, &[b"drop"])
            .await
            .map(drop)
    }

    /// A live task of `owner` recorded in the context (`up`), or one that ended: the claim lives
    /// while one is live, and `2 × retention` after the last (see the in-process ledger's
    /// `contexts.rs`).
    pub(super) async fn context_task_live(
        &self,
        agent: &str,
        context: &str,
        owner: &str,
        up: bool,
    ) -> Result<(), LedgerError> {
        let after = millis(self.retention * 2).to_string();
        let horizon = millis(LIVE_TTL + self.retention).to_string();
        self.context_script(
            agent,
            context,
            owner,
            &[
                b"live",
                if up { b"1" } else { b"0" },
                after.as_bytes(),
                horizon.as_bytes(),
            ],
        )
        .await
        .map(drop)
    }

    /// `owner`'s claims over every partition.
    pub(super) async fn contexts_of_inner(&self, owner: &str) -> Result<u64, LedgerError> {
        self.counted(owner, "ctxo").await
    }
}

impl RedisLedger {
    /// Where context `context` of `agent` lives (`TaskLedger::set_context_replica`): a string
    /// in the context's partition, expiring on its own.
    fn home_key(&self, agent: &str, context: &str) -> String {
        let keys = &self.store.keys;
        let name = format!("{agent}\n{context}");
        let part = keys.part(keys.of(&name));
        format!("{part}home:{agent}:{context}")
    }

    pub(super) async fn set_home(
        &self,
        agent: &str,
        context: &str,
        replica: &str,
        ttl: Duration,
    ) -> Result<(), LedgerError> {
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.home_key(agent, context))
            .arg(replica)
            .arg("PX")
            .arg(millis(ttl));
        let cmd = &cmd;
        self.write(None, |mut c| async move {
            let () = cmd.query_async(&mut c).await?;
            Ok(((), c))
        })
        .await
    }

    pub(super) async fn home(
        &self,
        agent: &str,
        context: &str,
    ) -> Result<Option<std::sync::Arc<str>>, LedgerError> {
        let mut cmd = redis::cmd("GET");
        cmd.arg(self.home_key(agent, context));
        let cmd = &cmd;
        let got: Option<String> = self
            .read(|mut c| async move { cmd.query_async(&mut c).await })
            .await?;
        Ok(got.map(Into::into))
    }
}
