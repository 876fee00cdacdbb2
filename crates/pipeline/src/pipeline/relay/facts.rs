//! What a replica tells the others about a call it holds, kept in the
//! relay's Redis under a key of its own for as long as the call may wait
//! (`SET … PX`): the approval page's facts of a pending approval, so any
//! replica's page shows it. Sealed with the cluster's `[state]` keys, as a
//! relay message is: Redis sees no form token or text in clear.

use std::time::Duration;

use serde::{de::DeserializeOwned, Serialize};

use super::{Relay, RelayError, REDIS_TIMEOUT};

/// What a stored fact starts with, sealed.
const FACT_PREFIX: &str = "fact.";
/// At most this many keys are read for one listing.
const MAX_LISTED: usize = 10_000;

impl Relay {
    /// Keep `value` under `key` for `ttl`.
    pub(crate) async fn put_fact(
        &self,
        key: &str,
        value: &impl Serialize,
        ttl: Duration,
    ) -> Result<(), RelayError> {
        let keys = self.keys.load_full().ok_or(RelayError::Unavailable)?;
        let sealed = keys
            .keys
            .seal_as(FACT_PREFIX, value)
            .ok_or(RelayError::Unavailable)?;
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let cmd = redis::cmd("SET")
            .arg(key)
            .arg(sealed)
            .arg("PX")
            .arg(ms)
            .to_owned();
        self.query::<()>(cmd).await
    }

    /// The value kept under `key`, when there is one this cluster sealed.
    pub(crate) async fn fact<T: DeserializeOwned>(
        &self,
        key: &str,
    ) -> Result<Option<T>, RelayError> {
        let keys = self.keys.load_full().ok_or(RelayError::Unavailable)?;
        let stored: Option<String> = self.query(redis::cmd("GET").arg(key).to_owned()).await?;
        Ok(stored.and_then(|s| keys.keys.open_as(FACT_PREFIX, &s).ok()))
    }

    /// Forget `key`.
    pub(crate) async fn drop_fact(&self, key: &str) -> Result<(), RelayError> {
        self.query::<i64>(redis::cmd("DEL").arg(key).to_owned())
            .await
            .map(|_| ())
    }

    /// The keys that start with `prefix` (at most [`MAX_LISTED`]).
    pub(crate) async fn fact_keys(&self, prefix: &str) -> Result<Vec<String>, RelayError> {
        let mut found = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let cmd = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(format!("{prefix}*"))
                .arg("COUNT")
                .arg(500)
                .to_owned();
            let (next, keys): (u64, Vec<String>) = self.query(cmd).await?;
            found.extend(keys);
            if next == 0 || found.len() >= MAX_LISTED {
                found.truncate(MAX_LISTED);
                return Ok(found);
            }
            cursor = next;
        }
    }

    async fn query<T: redis::FromRedisValue>(&self, cmd: redis::Cmd) -> Result<T, RelayError> {
        let mut conn = self.publisher().await?;
        match tokio::time::timeout(REDIS_TIMEOUT, cmd.query_async::<T>(&mut conn)).await {
            Ok(Ok(v)) => Ok(v),
            _ => Err(RelayError::Unavailable),
        }
    }
}
