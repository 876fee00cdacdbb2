//! The pins in Redis, shared by every instance: per upstream two hashes,
//! `<prefix>listing:<upstream id>:pinned` and `…:held` (field `kind:name`,
//! value the hex digest), the held definitions' texts in `…:heldtext`
//! and their total size in `…:heldbytes` (bounded as in memory). A listing
//! is compared and pinned in one atomic Lua script, so two instances seeing
//! the same change record it once.
//! Every call is bounded by the timeout; an error or a timeout is
//! [`StoreError::Unavailable`] (logged once per outage, reported as
//! `listings` each time), never a wait.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use redis::aio::ConnectionManager;
use tokio::sync::OnceCell;

use super::{
    Change, Digests, Seen, Selector, StoreError, MAX_HELD_TEXTS_BYTES, MAX_HELD_TEXT_BYTES,
    MAX_ITEMS_PER_UPSTREAM,
};
use crate::model::{Health, HealthReport, StoreFailure, StoreUser};

/// Forget a held text (KEYS[3], its total in KEYS[4]).
const FORGET_TEXT_LUA: &str = r#"
local function forget(f)
  local old = redis.call('HSTRLEN', KEYS[3], f)
  if old > 0 then
    redis.call('HDEL', KEYS[3], f)
    redis.call('DECRBY', KEYS[4], old)
  end
end
"#;

/// KEYS: pinned, held, heldtext, heldbytes. ARGV: hold (1/0), the bound on
/// pins, on one text, on the texts, then field, digest, text triples. Per
/// item: 0 same, 1 pinned, 2 held (first), 3 held again, 4 repinned,
/// 5 unpinned (bound reached).
const OBSERVE_LUA: &str = r#"
local hold = ARGV[1] == '1'
local max = tonumber(ARGV[2])
local max_text = tonumber(ARGV[3])
local max_texts = tonumber(ARGV[4])
local n = redis.call('HLEN', KEYS[1])
local out = {}
for i = 5, #ARGV, 3 do
  local f, d, t = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local pin = redis.call('HGET', KEYS[1], f)
  if not pin then
    if n >= max then
      out[#out + 1] = 5
    else
      redis.call('HSET', KEYS[1], f, d)
      n = n + 1
      out[#out + 1] = 1
    end
  elseif pin == d then
    if redis.call('HEXISTS', KEYS[2], f) == 1 then redis.call('HDEL', KEYS[2], f) end
    forget(f)
    out[#out + 1] = 0
  elseif not hold then
    redis.call('HSET', KEYS[1], f, d)
    if redis.call('HEXISTS', KEYS[2], f) == 1 then redis.call('HDEL', KEYS[2], f) end
    forget(f)
    out[#out + 1] = 4
  elseif redis.call('HGET', KEYS[2], f) == d then
    out[#out + 1] = 3
  else
    redis.call('HSET', KEYS[2], f, d)
    forget(f)
    local total = tonumber(redis.call('GET', KEYS[4]) or '0')
    if #t <= max_text and total + #t <= max_texts then
      redis.call('HSET', KEYS[3], f, t)
      redis.call('INCRBY', KEYS[4], #t)
    end
    out[#out + 1] = 2
  end
end
return out
"#;

/// KEYS: pinned, held, heldtext, heldbytes. ARGV: field, digest pairs: each
/// pinned when still held with that digest. Returns those pinned.
const ACCEPT_LUA: &str = r#"
local out = {}
for i = 1, #ARGV, 2 do
  local f, want = ARGV[i], ARGV[i + 1]
  local d = redis.call('HGET', KEYS[2], f)
  if d and d == want then
    redis.call('HSET', KEYS[1], f, d)
    redis.call('HDEL', KEYS[2], f)
    forget(f)
    out[#out + 1] = f
  end
end
return out
"#;

pub(crate) struct RedisPins {
    url: String,
    prefix: String,
    timeout: Duration,
    conn: OnceCell<ConnectionManager>,
    observe: redis::Script,
    accept: redis::Script,
    down: AtomicBool,
    /// Where failures are reported (set once, by the first gateway).
    health: OnceLock<HealthReport>,
}

impl RedisPins {
    pub(crate) fn new(url: &str, timeout: Duration, prefix: &str) -> RedisPins {
        RedisPins {
            url: url.to_owned(),
            prefix: prefix.to_owned(),
            timeout,
            conn: OnceCell::new(),
            observe: redis::Script::new(&format!("{FORGET_TEXT_LUA}{OBSERVE_LUA}")),
            accept: redis::Script::new(&format!("{FORGET_TEXT_LUA}{ACCEPT_LUA}")),
            down: AtomicBool::new(false),
            health: OnceLock::new(),
        }
    }

    /// Report failures to `health` from now on (the first call wins).
    pub(crate) fn report_to(&self, health: &HealthReport) {
        let _ = self.health.set(health.clone());
        self.report(Health::StoreDown(
            StoreUser::Listings,
            self.down.load(Ordering::Relaxed),
        ));
    }

    fn report(&self, health: Health) {
        if let Some(h) = self.health.get() {
            h.report(health);
        }
    }

    pub(crate) fn serves(&self, url: &str, prefix: &str) -> bool {
        self.url == url && self.prefix == prefix
    }

    fn keys(&self, upstream: &str) -> (String, String) {
        let base = format!("{}listing:{upstream}:", self.prefix);
        (format!("{base}pinned"), format!("{base}held"))
    }

    /// The held texts' hash and their total's key.
    fn text_keys(&self, upstream: &str) -> (String, String) {
        let base = format!("{}listing:{upstream}:", self.prefix);
        (format!("{base}heldtext"), format!("{base}heldbytes"))
    }

    async fn connection(&self) -> Result<ConnectionManager, StoreError> {
        let connect = self.conn.get_or_try_init(|| async {
            let client =
                redis::Client::open(self.url.as_str()).map_err(|_| StoreError::Unavailable)?;
            let config = redis::aio::ConnectionManagerConfig::new()
                .set_number_of_retries(1)
                .set_connection_timeout(self.timeout.max(Duration::from_millis(500)))
                .set_response_timeout(self.timeout);
            ConnectionManager::new_with_config(client, config)
                .await
                .map_err(|_| StoreError::Unavailable)
        });
        match tokio::time::timeout(self.timeout.max(Duration::from_secs(1)), connect).await {
            Ok(Ok(c)) => Ok(c.clone()),
            _ => Err(self.failed(StoreFailure::Connect, "cannot connect")),
        }
    }

    fn failed(&self, failure: StoreFailure, why: &str) -> StoreError {
        self.report(Health::StoreFailed(StoreUser::Listings, failure));
        if !self.down.swap(true, Ordering::AcqRel) {
            self.report(Health::StoreDown(StoreUser::Listings, true));
            tracing::error!(
                error = why,
                "the store of pinned listings (Redis) is unavailable; under on_change = \"remove\" lists and calls to listed items are refused until it is back"
            );
        }
        StoreError::Unavailable
    }

    fn answered(&self) {
        if self.down.swap(false, Ordering::AcqRel) {
            self.report(Health::StoreDown(StoreUser::Listings, false));
            tracing::info!("the store of pinned listings (Redis) is reachable again");
        }
    }

    /// One call, bounded by the timeout.
    async fn run<T, F>(&self, call: F) -> Result<T, StoreError>
    where
        F: std::future::Future<Output = redis::RedisResult<T>>,
    {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(v)) => {
                self.answered();
                Ok(v)
            }
            Ok(Err(e)) => Err(self.failed(StoreFailure::Failed, &e.to_string())),
            Err(_) => Err(self.failed(StoreFailure::Timeout, "timed out")),
        }
    }

    pub(crate) async fn observe(
        &self,
        upstream: &str,
        items: &[Seen],
        hold: bool,
    ) -> Result<Vec<Change>, StoreError> {
        let mut conn = self.connection().await?;
        let (pinned, held) = self.keys(upstream);
        let (texts, bytes) = self.text_keys(upstream);
        let mut call = self.observe.key(pinned);
        call.key(held)
            .key(texts)
            .key(bytes)
            .arg(if hold { 1 } else { 0 })
            .arg(MAX_ITEMS_PER_UPSTREAM)
            .arg(MAX_HELD_TEXT_BYTES)
            .arg(MAX_HELD_TEXTS_BYTES);
        for seen in items {
            call.arg(&seen.field).arg(&seen.digest).arg(&seen.text);
        }
        let codes: Vec<i64> = self.run(call.invoke_async(&mut conn)).await?;
        Ok(codes
            .into_iter()
            .map(|c| match c {
                0 => Change::Same,
                1 => Change::Pinned,
                2 => Change::Held { first: true },
                3 => Change::Held { first: false },
                4 => Change::Repinned,
                _ => Change::Unpinned,
            })
            .collect())
    }

    pub(crate) async fn is_held(&self, upstream: &str, field: &str) -> Result<bool, StoreError> {
        let mut conn = self.connection().await?;
        let (_, held) = self.keys(upstream);
        let cmd = redis::cmd("HEXISTS").arg(held).arg(field).to_owned();
        self.run(cmd.query_async(&mut conn)).await
    }

    pub(crate) async fn entries(&self, upstream: &str) -> Result<(Digests, Digests), StoreError> {
        let mut conn = self.connection().await?;
        let (pinned, held) = self.keys(upstream);
        let mut pipe = redis::pipe();
        pipe.cmd("HGETALL").arg(pinned).cmd("HGETALL").arg(held);
        self.run(pipe.query_async(&mut conn)).await
    }

    /// Pinned, held and the held texts.
    pub(crate) async fn held(
        &self,
        upstream: &str,
    ) -> Result<(Digests, Digests, Digests), StoreError> {
        let mut conn = self.connection().await?;
        let (pinned, held) = self.keys(upstream);
        let (texts, _) = self.text_keys(upstream);
        let mut pipe = redis::pipe();
        pipe.cmd("HGETALL")
            .arg(pinned)
            .cmd("HGETALL")
            .arg(held)
            .cmd("HGETALL")
            .arg(texts);
        self.run(pipe.query_async(&mut conn)).await
    }

    pub(crate) async fn accept(
        &self,
        upstream: &str,
        which: &Selector,
    ) -> Result<Vec<String>, StoreError> {
        let (_, held) = self.entries(upstream).await?;
        let chosen: Vec<(String, String)> = held
            .into_iter()
            .filter(|(f, d)| which.matches(f, d))
            .collect();
        if chosen.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.connection().await?;
        let (pinned, held) = self.keys(upstream);
        let (texts, bytes) = self.text_keys(upstream);
        let mut call = self.accept.key(pinned);
        call.key(held).key(texts).key(bytes);
        for (f, d) in &chosen {
            call.arg(f).arg(d);
        }
        self.run(call.invoke_async(&mut conn)).await
    }
}
