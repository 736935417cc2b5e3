//! The Redis ledger's key store: idempotency keys of creates and A2A messages, one hash each
//! under `{prefix}idem:`, claimed, completed and released by one
//! script ([`idempotency.lua`](../idempotency.lua)), so replicas racing on one key never both
//! take it.

use std::time::Duration;

use bytes::Bytes;
use redis::Value as RValue;

use super::{hex, millis, unhex, RedisLedger};
use crate::ledger::{Answer, Claim, Fingerprint, LedgerError};

impl RedisLedger {
    /// One operation of the key script (`idempotency.lua`) on `scope`'s `key`, its arguments
    /// set by `args`: a fenced write, like every ledger write.
    async fn key_op<T>(
        &self,
        scope: &str,
        key: &str,
        args: impl FnOnce(&mut redis::ScriptInvocation<'_>),
    ) -> Result<T, LedgerError>
    where
        T: redis::FromRedisValue + Send,
    {
        let idem = self.idem_key(scope, key);
        let fence = self.fence(&idem);
        let mut inv = self.keys.key(idem);
        args(&mut inv);
        let inv = &inv;
        self.write(fence.as_deref(), |mut c| async move {
            Ok((inv.invoke_async(&mut c).await?, c))
        })
        .await
    }

    pub(super) async fn claim_inner(
        &self,
        scope: &str,
        key: &str,
        fingerprint: Fingerprint,
        token: &str,
        lease: Duration,
    ) -> Result<Claim, LedgerError> {
        let reply: Vec<RValue> = self
            .key_op(scope, key, |inv| {
                inv.arg("claim")
                    .arg(hex(&fingerprint))
                    .arg(token)
                    .arg(millis(lease));
            })
            .await?;
        let bad = || super::bad_reply("idempotency");
        let bytes = |i: usize| -> Option<Vec<u8>> {
            reply
                .get(i)
                .and_then(|v| redis::from_redis_value_ref::<Vec<u8>>(v).ok())
        };
        let state = bytes(0).ok_or_else(bad)?;
        if state == b"claimed" {
            return Ok(Claim::Claimed);
        }
        let fingerprint = bytes(1).and_then(|h| unhex(&h)).ok_or_else(bad)?;
        match &state[..] {
            b"inflight" => Ok(Claim::InFlight { fingerprint }),
            b"done" => {
                let status = bytes(2)
                    .and_then(|s| String::from_utf8(s).ok())
                    .and_then(|s| s.parse::<u16>().ok())
                    .ok_or_else(bad)?;
                let content_type = bytes(3)
                    .and_then(|s| String::from_utf8(s).ok())
                    .ok_or_else(bad)?;
                let body = Bytes::from(bytes(4).ok_or_else(bad)?);
                Ok(Claim::Done {
                    fingerprint,
                    answer: Answer {
                        status,
                        content_type,
                        body,
                    },
                })
            }
            _ => Err(bad()),
        }
    }

    pub(super) async fn complete_inner(
        &self,
        scope: &str,
        key: &str,
        token: &str,
        fingerprint: Fingerprint,
        answer: Answer,
        ttl: Duration,
    ) -> Result<bool, LedgerError> {
        let stored: i64 = self
            .key_op(scope, key, |inv| {
                inv.arg("complete")
                    .arg(hex(&fingerprint))
                    .arg(token)
                    .arg(millis(ttl))
                    .arg(answer.status)
                    .arg(&answer.content_type)
                    .arg(answer.body.as_ref());
            })
            .await?;
        Ok(stored == 1)
    }

    pub(super) async fn release_inner(
        &self,
        scope: &str,
        key: &str,
        token: &str,
    ) -> Result<(), LedgerError> {
        let _: i64 = self
            .key_op(scope, key, |inv| {
                inv.arg("release").arg("").arg(token);
            })
            .await?;
        Ok(())
    }
}
