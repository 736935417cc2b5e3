//! File bindings in the Redis ledger (`TaskLedger::bind_files`): one string per binding,
//! `{p}file:{id}` holding the binding ([`FileRef::encode`]), in no partition (it is looked up
//! by id alone), written again by each binding of the same URL so that it expires with its
//! task: a final task's after the retention, a live one's after the live bound (the task's own
//! expiries, `apply.lua`). The ids' key is one random key every replica shares, `{p}file-key`,
//! made once (`SET NX`) and read once per process.

use std::sync::OnceLock;

use super::{millis, RedisLedger, LIVE_TTL};
use crate::ledger::files::{file_id, new_key, FileRef, FileScope};
use crate::ledger::LedgerError;

impl RedisLedger {
    fn file_key(&self, id: &str) -> String {
        format!("{}file:{id}", self.store.keys.global())
    }

    /// The ids' key: this process's copy, else the one in Redis (made now if none is).
    async fn ids_key(&self) -> Result<&[u8], LedgerError> {
        if let Some(k) = self.file_ids.get() {
            return Ok(k);
        }
        let name = format!("{}file-key", self.store.keys.global());
        let fresh = new_key().to_vec();
        let fence = self.fence(&name);
        let mut cmd = redis::cmd("SET");
        cmd.arg(&name).arg(&fresh).arg("NX").arg("GET");
        let cmd = &cmd;
        let standing: Option<Vec<u8>> = self
            .write(fence.as_deref(), |mut c| async move {
                Ok((cmd.query_async(&mut c).await?, c))
            })
            .await?;
        // Another replica's key, when it made one first (a key of another length is none the
        // gateway wrote: it is used as it is, whatever it holds).
        let key = standing.filter(|k| !k.is_empty()).unwrap_or(fresh);
        Ok(self.file_ids.get_or_init(|| key))
    }

    pub(super) async fn bind_files_inner(
        &self,
        scope: FileScope<'_>,
        urls: &[String],
    ) -> Result<Vec<String>, LedgerError> {
        let key = self.ids_key().await?;
        let ttl = if scope.live && scope.task.is_some() {
            LIVE_TTL
        } else {
            self.retention
        };
        let ttl = millis(ttl).to_string();
        let mut ids = Vec::with_capacity(urls.len());
        // One command per binding: the keys are in no partition, so on a cluster each is in a
        // slot of its own.
        for url in urls {
            let file = FileRef::of(&scope, url);
            let id = file_id(key, &file);
            let name = self.file_key(&id);
            let fence = self.fence(&name);
            let mut cmd = redis::cmd("SET");
            cmd.arg(name).arg(file.encode()).arg("PX").arg(&ttl);
            let cmd = &cmd;
            self.write(fence.as_deref(), |mut c| async move {
                let _: Option<String> = cmd.query_async(&mut c).await?;
                Ok(((), c))
            })
            .await?;
            ids.push(id);
        }
        Ok(ids)
    }

    pub(super) async fn file_inner(&self, id: &str) -> Result<Option<FileRef>, LedgerError> {
        let mut cmd = redis::cmd("GET");
        cmd.arg(self.file_key(id));
        let cmd = &cmd;
        let held: Option<String> = self
            .read(|mut c| async move { cmd.query_async(&mut c).await })
            .await?;
        Ok(held.as_deref().and_then(FileRef::decode))
    }
}

/// This process's copy of the ids' key (`RedisLedger::file_ids`).
pub(super) type IdsKey = OnceLock<Vec<u8>>;
