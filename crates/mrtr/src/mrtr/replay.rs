//! Single-use sealed states: a state is consumed when the answer to its
//! retry is delivered; a later retry with it is a replay. (A client's
//! network retry before any answer came back still works.) One instance
//! remembers consumed states in memory; a cluster shares them through Redis
//! (keys with the state's own expiry, so nothing outlives the state).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::model::Clock;

use redis::aio::ConnectionManager;
use tokio::sync::OnceCell;

use super::settings::ReplayBackend;

/// How many redemptions one instance keeps before it sweeps expired ones.
const LOCAL_SWEEP_AT: usize = 100_000;

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("the single-use state store is unreachable")]
    Unavailable,
}

pub enum ReplayStore {
    /// Consumed ids and byte counters, each with its expiry (unix seconds).
    Local(Mutex<HashMap<String, (u64, u64)>>),
    Redis {
        url: String,
        conn: OnceCell<ConnectionManager>,
    },
}

impl ReplayStore {
    /// Whether this store serves `backend` (a reload may keep it).
    pub fn serves(&self, backend: &ReplayBackend) -> bool {
        match (self, backend) {
            (ReplayStore::Local(_), ReplayBackend::Local) => true,
            (ReplayStore::Redis { url, .. }, ReplayBackend::Redis(u)) => url == u,
            _ => false,
        }
    }

    pub fn new(backend: &ReplayBackend) -> ReplayStore {
        match backend {
            ReplayBackend::Local => ReplayStore::Local(Mutex::new(HashMap::new())),
            ReplayBackend::Redis(url) => ReplayStore::Redis {
                url: url.clone(),
                conn: OnceCell::new(),
            },
        }
    }

    /// Whether state `id` was consumed.
    pub async fn is_consumed(&self, id: &str) -> Result<bool, ReplayError> {
        match self {
            ReplayStore::Local(map) => Ok(map
                .lock()
                .map(|m| m.get(id).is_some_and(|(exp, _)| *exp >= now_secs()))
                .unwrap_or(true)),
            ReplayStore::Redis { url, conn } => {
                let mut c = connection(url, conn).await?;
                let cmd = redis::cmd("EXISTS").arg(key(id)).to_owned();
                let found: i64 = query(cmd, &mut c).await?;
                Ok(found > 0)
            }
        }
    }

    /// Consume state `id`, valid until `expires` (unix seconds).
    pub async fn consume(&self, id: &str, expires: u64) -> Result<(), ReplayError> {
        match self {
            ReplayStore::Local(map) => {
                let Ok(mut map) = map.lock() else {
                    return Err(ReplayError::Unavailable);
                };
                sweep(&mut map);
                map.insert(id.to_owned(), (expires, 1));
                Ok(())
            }
            ReplayStore::Redis { url, conn } => {
                let mut c = connection(url, conn).await?;
                let cmd = redis::cmd("SET")
                    .arg(key(id))
                    .arg(1)
                    .arg("EXAT")
                    .arg(expires.max(1))
                    .to_owned();
                let _: Option<String> = query(cmd, &mut c).await?;
                Ok(())
            }
        }
    }
}

impl ReplayStore {
    /// Consume `id` if nobody has: `Ok(true)` for the first, `Ok(false)` after.
    pub async fn consume_once(&self, id: &str, expires: u64) -> Result<bool, ReplayError> {
        match self {
            ReplayStore::Local(map) => {
                let Ok(mut map) = map.lock() else {
                    return Err(ReplayError::Unavailable);
                };
                sweep(&mut map);
                let now = now_secs();
                if map.get(id).is_some_and(|(exp, _)| *exp >= now) {
                    return Ok(false);
                }
                map.insert(id.to_owned(), (expires, 1));
                Ok(true)
            }
            ReplayStore::Redis { url, conn } => {
                let mut c = connection(url, conn).await?;
                let cmd = redis::cmd("SET")
                    .arg(key(id))
                    .arg(1)
                    .arg("NX")
                    .arg("EXAT")
                    .arg(expires.max(1))
                    .to_owned();
                let reply: Option<String> = query(cmd, &mut c).await?;
                Ok(reply.is_some())
            }
        }
    }

    /// Add `n` to the byte counter of `operation` and return the total.
    pub async fn add_bytes(
        &self,
        operation: &str,
        n: u64,
        expires: u64,
    ) -> Result<u64, ReplayError> {
        let id = format!("bytes.{operation}");
        match self {
            ReplayStore::Local(map) => {
                let Ok(mut map) = map.lock() else {
                    return Err(ReplayError::Unavailable);
                };
                sweep(&mut map);
                let entry = map.entry(id).or_insert((expires, 0));
                entry.0 = entry.0.max(expires);
                entry.1 = entry.1.saturating_add(n);
                Ok(entry.1)
            }
            ReplayStore::Redis { url, conn } => {
                let mut c = connection(url, conn).await?;
                let mut pipe = redis::pipe();
                pipe.atomic()
                    .cmd("INCRBY")
                    .arg(key(&id))
                    .arg(n)
                    .cmd("EXPIREAT")
                    .arg(key(&id))
                    .arg(expires.max(1))
                    .ignore();
                let (total,): (u64,) =
                    tokio::time::timeout(Duration::from_millis(500), pipe.query_async(&mut c))
                        .await
                        .map_err(|_| ReplayError::Unavailable)?
                        .map_err(|_| ReplayError::Unavailable)?;
                Ok(total)
            }
        }
    }
}

fn sweep(map: &mut HashMap<String, (u64, u64)>) {
    if map.len() >= LOCAL_SWEEP_AT {
        let now = now_secs();
        map.retain(|_, (exp, _)| *exp >= now);
    }
}

/// Expiry is compared with the wall clock: it is what Redis uses for `EXAT`.
fn now_secs() -> u64 {
    crate::model::SystemClock.now_secs()
}

fn key(id: &str) -> String {
    format!("portcullis:state:{id}")
}

async fn connection(
    url: &str,
    conn: &OnceCell<ConnectionManager>,
) -> Result<ConnectionManager, ReplayError> {
    let manager = conn
        .get_or_try_init(|| async {
            let client = redis::Client::open(url).map_err(|_| ReplayError::Unavailable)?;
            tokio::time::timeout(Duration::from_secs(2), ConnectionManager::new(client))
                .await
                .map_err(|_| ReplayError::Unavailable)?
                .map_err(|_| ReplayError::Unavailable)
        })
        .await?;
    Ok(manager.clone())
}

async fn query<T: redis::FromRedisValue>(
    cmd: redis::Cmd,
    c: &mut ConnectionManager,
) -> Result<T, ReplayError> {
    tokio::time::timeout(Duration::from_millis(500), cmd.query_async(c))
        .await
        .map_err(|_| ReplayError::Unavailable)?
        .map_err(|_| ReplayError::Unavailable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_consumed_state_stays_consumed_until_it_expires() {
        let s = ReplayStore::new(&ReplayBackend::Local);
        let far = now_secs() + 100;
        assert!(!s.is_consumed("op.1").await.unwrap());
        s.consume("op.1", far).await.unwrap();
        assert!(s.is_consumed("op.1").await.unwrap());
        assert!(!s.is_consumed("op.2").await.unwrap());
        // Past its expiry an id is forgotten (the state itself no longer opens).
        s.consume("op.3", now_secs().saturating_sub(1))
            .await
            .unwrap();
        assert!(!s.is_consumed("op.3").await.unwrap());
    }
}
