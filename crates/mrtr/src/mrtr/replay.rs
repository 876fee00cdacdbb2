//! Single-use sealed states: a state is consumed when the answer to its
//! retry is delivered; a later retry with it is a replay. (A client's
//! network retry before any answer came back still works.) One instance
//! remembers consumed states in memory; a cluster shares them through Redis
//! (keys with the state's own expiry, so nothing outlives the state).
//! Every failed Redis call is reported ([`HealthReport`]) as `replay`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::model::{Clock, Health, HealthReport, StoreFailure, StoreUser};

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
    Redis(RedisReplay),
}

/// The store in Redis: one connection, and whether it is failing.
pub struct RedisReplay {
    url: String,
    conn: OnceCell<ConnectionManager>,
    down: AtomicBool,
    /// Where failures are reported (set once, by the first gateway).
    health: OnceLock<HealthReport>,
}

impl ReplayStore {
    /// Whether this store serves `backend` (a reload may keep it).
    pub fn serves(&self, backend: &ReplayBackend) -> bool {
        match (self, backend) {
            (ReplayStore::Local(_), ReplayBackend::Local) => true,
            (ReplayStore::Redis(r), ReplayBackend::Redis(u)) => &r.url == u,
            _ => false,
        }
    }

    pub fn new(backend: &ReplayBackend) -> ReplayStore {
        match backend {
            ReplayBackend::Local => ReplayStore::Local(Mutex::new(HashMap::new())),
            ReplayBackend::Redis(url) => ReplayStore::Redis(RedisReplay {
                url: url.clone(),
                conn: OnceCell::new(),
                down: AtomicBool::new(false),
                health: OnceLock::new(),
            }),
        }
    }

    /// Whether the store is shared by the instances (Redis).
    pub fn is_shared(&self) -> bool {
        matches!(self, ReplayStore::Redis(_))
    }

    /// Report the Redis store's failures to `health` (the first call wins;
    /// the local store cannot fail).
    pub fn report_to(&self, health: &HealthReport) {
        if let ReplayStore::Redis(r) = self {
            let _ = r.health.set(health.clone());
            r.report(Health::StoreDown(
                StoreUser::Replay,
                r.down.load(Ordering::Relaxed),
            ));
        }
    }

    /// Report what was done without the store (Redis only).
    pub fn fell_back(&self, fallback: crate::model::Fallback) {
        if let ReplayStore::Redis(r) = self {
            r.report(Health::StoreFellBack(StoreUser::Replay, fallback));
        }
    }

    /// Whether state `id` was consumed.
    pub async fn is_consumed(&self, id: &str) -> Result<bool, ReplayError> {
        match self {
            ReplayStore::Local(map) => Ok(map
                .lock()
                .map(|m| m.get(id).is_some_and(|(exp, _)| *exp >= now_secs()))
                .unwrap_or(true)),
            ReplayStore::Redis(r) => {
                let mut c = r.connection().await?;
                let cmd = redis::cmd("EXISTS").arg(key(id)).to_owned();
                let found: i64 = r.query(cmd, &mut c).await?;
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
            ReplayStore::Redis(r) => {
                let mut c = r.connection().await?;
                let cmd = redis::cmd("SET")
                    .arg(key(id))
                    .arg(1)
                    .arg("EXAT")
                    .arg(expires.max(1))
                    .to_owned();
                let _: Option<String> = r.query(cmd, &mut c).await?;
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
            ReplayStore::Redis(r) => {
                let mut c = r.connection().await?;
                let cmd = redis::cmd("SET")
                    .arg(key(id))
                    .arg(1)
                    .arg("NX")
                    .arg("EXAT")
                    .arg(expires.max(1))
                    .to_owned();
                let reply: Option<String> = r.query(cmd, &mut c).await?;
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
            ReplayStore::Redis(r) => {
                let mut c = r.connection().await?;
                let mut pipe = redis::pipe();
                pipe.atomic()
                    .cmd("INCRBY")
                    .arg(key(&id))
                    .arg(n)
                    .cmd("EXPIREAT")
                    .arg(key(&id))
                    .arg(expires.max(1))
                    .ignore();
                let (total,): (u64,) = r.answered(pipe.query_async(&mut c)).await?;
                Ok(total)
            }
        }
    }
}

/// The keyed fingerprints of `flows.rs`, in the same Redis (the memory
/// store keeps them itself).
impl ReplayStore {
    /// Add `origin` to each key's set, each expiring `ttl` from now.
    pub(crate) async fn flows_add(
        &self,
        keys: &[String],
        origin: &str,
        ttl: Duration,
    ) -> Result<(), ReplayError> {
        let ReplayStore::Redis(r) = self else {
            return Ok(());
        };
        let mut c = r.connection().await?;
        let mut pipe = redis::pipe();
        for k in keys {
            pipe.cmd("SADD").arg(k).arg(origin).ignore();
            pipe.cmd("PEXPIRE")
                .arg(k)
                .arg(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1))
                .ignore();
        }
        let () = r.answered(pipe.query_async(&mut c)).await?;
        Ok(())
    }

    /// The set of each key (empty where there is none), in order.
    pub(crate) async fn flows_members(
        &self,
        keys: &[String],
    ) -> Result<Vec<Vec<String>>, ReplayError> {
        let ReplayStore::Redis(r) = self else {
            return Ok(vec![Vec::new(); keys.len()]);
        };
        let mut c = r.connection().await?;
        let mut pipe = redis::pipe();
        for k in keys {
            pipe.cmd("SMEMBERS").arg(k);
        }
        r.answered(pipe.query_async(&mut c)).await
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

impl RedisReplay {
    fn report(&self, health: Health) {
        if let Some(h) = self.health.get() {
            h.report(health);
        }
    }

    /// A failed call: reported, and logged once per outage.
    fn failed(&self, failure: StoreFailure) -> ReplayError {
        self.report(Health::StoreFailed(StoreUser::Replay, failure));
        if !self.down.swap(true, Ordering::AcqRel) {
            self.report(Health::StoreDown(StoreUser::Replay, true));
            tracing::error!(
                error = failure.as_str(),
                "the single-use state store (Redis) is unavailable"
            );
        }
        ReplayError::Unavailable
    }

    async fn connection(&self) -> Result<ConnectionManager, ReplayError> {
        let manager = self
            .conn
            .get_or_try_init(|| async {
                let client = redis::Client::open(self.url.as_str())
                    .map_err(|_| self.failed(StoreFailure::Connect))?;
                tokio::time::timeout(Duration::from_secs(2), ConnectionManager::new(client))
                    .await
                    .map_err(|_| self.failed(StoreFailure::Connect))?
                    .map_err(|_| self.failed(StoreFailure::Connect))
            })
            .await?;
        Ok(manager.clone())
    }

    async fn query<T: redis::FromRedisValue>(
        &self,
        cmd: redis::Cmd,
        c: &mut ConnectionManager,
    ) -> Result<T, ReplayError> {
        self.answered(cmd.query_async(c)).await
    }

    /// One call, bounded by the timeout.
    async fn answered<T>(
        &self,
        call: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, ReplayError> {
        match tokio::time::timeout(Duration::from_millis(500), call).await {
            Ok(Ok(v)) => {
                if self.down.swap(false, Ordering::AcqRel) {
                    self.report(Health::StoreDown(StoreUser::Replay, false));
                    tracing::info!("the single-use state store (Redis) is reachable again");
                }
                Ok(v)
            }
            Ok(Err(_)) => Err(self.failed(StoreFailure::Failed)),
            Err(_) => Err(self.failed(StoreFailure::Timeout)),
        }
    }
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
