//! Blocking messages' sends in the Redis ledger ([`send.lua`](../send.lua)): one hash per
//! send, `{p}send:{id}`, expiring with the send, bound to a task by the first push that names
//! one (`HSETNX`, in the script: atomic across replicas).

use bytes::Bytes;

use super::{millis, RedisLedger};
use crate::ledger::LedgerError;

impl RedisLedger {
    fn send_key(&self, id: &str) -> String {
        format!("{}send:{id}", self.store.keys.global())
    }

    async fn send_script<T: redis::FromRedisValue + Send>(
        &self,
        id: &str,
        args: &[&[u8]],
    ) -> Result<T, LedgerError> {
        self.run_script(&self.send, &[&self.send_key(id)], args)
            .await
    }

    pub(super) async fn put_send_inner(
        &self,
        id: &str,
        entry: &[u8],
        ttl: std::time::Duration,
    ) -> Result<bool, LedgerError> {
        let ms = millis(ttl).to_string();
        let _: i64 = self
            .send_script(id, &[b"put", entry, ms.as_bytes()])
            .await?;
        Ok(true)
    }

    pub(super) async fn bind_send_inner(
        &self,
        id: &str,
        task_id: &str,
    ) -> Result<Option<(Bytes, String)>, LedgerError> {
        let bound: Option<(Vec<u8>, String)> =
            self.send_script(id, &[b"bind", task_id.as_bytes()]).await?;
        Ok(bound.map(|(entry, task)| (Bytes::from(entry), task)))
    }

    pub(super) async fn end_send_inner(&self, id: &str) -> Result<(), LedgerError> {
        let _: i64 = self.send_script(id, &[b"end"]).await?;
        Ok(())
    }
}
