//! Single-use sealed states: a state may be redeemed once. One instance
//! remembers redemptions in memory; a cluster shares them through Redis
//! (`SET NX` with the state's own expiry, so nothing outlives the state).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use redis::aio::ConnectionManager;
use tokio::sync::OnceCell;

use crate::config::ReplayBackend;

/// How many redemptions one instance keeps before it sweeps expired ones.
const LOCAL_SWEEP_AT: usize = 100_000;

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("the single-use state store is unreachable")]
    Unavailable,
}

pub enum ReplayStore {
    Local(Mutex<HashMap<String, u64>>),
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

    /// Record the redemption of state `id` valid until `expires` (unix
    /// seconds). `Ok(true)`: first use. `Ok(false)`: a replay.
    pub async fn redeem(&self, id: &str, expires: u64, now: u64) -> Result<bool, ReplayError> {
        match self {
            ReplayStore::Local(map) => Ok(redeem_local(map, id, expires, now)),
            ReplayStore::Redis { url, conn } => redeem_redis(url, conn, id, expires).await,
        }
    }
}

fn redeem_local(map: &Mutex<HashMap<String, u64>>, id: &str, expires: u64, now: u64) -> bool {
    let Ok(mut map) = map.lock() else {
        return false;
    };
    if map.len() >= LOCAL_SWEEP_AT {
        map.retain(|_, exp| *exp >= now);
    }
    match map.get(id) {
        Some(exp) if *exp >= now => false,
        _ => {
            map.insert(id.to_owned(), expires);
            true
        }
    }
}

async fn redeem_redis(
    url: &str,
    conn: &OnceCell<ConnectionManager>,
    id: &str,
    expires: u64,
) -> Result<bool, ReplayError> {
    let manager = conn
        .get_or_try_init(|| async {
            let client = redis::Client::open(url).map_err(|_| ReplayError::Unavailable)?;
            tokio::time::timeout(Duration::from_secs(2), ConnectionManager::new(client))
                .await
                .map_err(|_| ReplayError::Unavailable)?
                .map_err(|_| ReplayError::Unavailable)
        })
        .await?;
    let mut c = manager.clone();
    let key = format!("portcullis:state:{id}");
    let cmd = redis::cmd("SET")
        .arg(&key)
        .arg(1)
        .arg("NX")
        .arg("EXAT")
        .arg(expires.max(1))
        .to_owned();
    let reply: Result<Option<String>, _> =
        tokio::time::timeout(Duration::from_millis(500), cmd.query_async(&mut c))
            .await
            .map_err(|_| ReplayError::Unavailable)?;
    match reply {
        Ok(Some(_)) => Ok(true),
        Ok(None) => Ok(false),
        Err(_) => Err(ReplayError::Unavailable),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn local_store_redeems_once_until_expiry() {
        let s = ReplayStore::new(&ReplayBackend::Local);
        assert!(s.redeem("op.1", 100, 50).await.unwrap());
        assert!(!s.redeem("op.1", 100, 60).await.unwrap());
        assert!(s.redeem("op.2", 100, 60).await.unwrap());
        // Past its expiry an id is forgotten (the state itself no longer opens).
        assert!(s.redeem("op.1", 300, 200).await.unwrap());
    }
}
