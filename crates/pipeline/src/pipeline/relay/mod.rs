//! The relay between replicas: an answer or a retry that reaches a replica
//! other than the one where its call waits is handed to that one through
//! the shared Redis (the single-use store's, `[state] redis_url`), and the
//! holder's reply comes back the same way.
//!
//! Each replica listens on its own channel (`portcullis:relay:<instance>`,
//! the instance id every call it holds is named with, sealed into the
//! client's state), so a hand-off needs no lookup: it is published to the
//! channel the call's id names. Redis says how many listened; none means
//! the holder is gone (stopped, or cut from Redis), and the hand-off is
//! refused at once. A holder that listens but does not reply within the
//! wait's limit is gone too. This module moves checked hand-offs and their
//! replies; what a hand-off does at the holder is the [`Holder`]'s (the
//! bridge's calls), so the relay knows nothing of calls.
//!
//! Every message is sealed with the cluster's `[state]` keys (AES-256-GCM,
//! as a `requestState` is) and carries its own expiry: Redis sees no form
//! value in clear, and a message nobody sealed with those keys, or one
//! replayed late, is dropped.
//!
//! Nothing crosses when the single-use store is this instance's memory:
//! there is then no relay (a single replica behaves as before).

mod facts;
mod wire;

pub(crate) use wire::{Hand, HandKind, Reply};

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use futures_util::StreamExt;
use redis::aio::ConnectionManager;
use tokio::sync::{oneshot, watch, OnceCell};
use tokio::task::AbortHandle;

use crate::model::{Clock, Reason, Refusal};
use crate::mrtr::settings::StateSettings;
use wire::{Envelope, Sealed};

/// How long a replica waits for Redis to take its subscription or a publish.
const REDIS_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a lost subscription waits before it is made again.
const RESUBSCRIBE_AFTER: Duration = Duration::from_millis(500);
/// How long a sealed message may be opened after it was sent: the transit,
/// and the replicas' clocks a little apart.
const SEALED_FOR_SECS: u64 = 30;
/// What a sealed relay message starts with.
const SEALED_PREFIX: &str = "relay.";

/// The state of this instance's subscription to its channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listening {
    /// Not tried yet, or its first try is under way.
    Starting,
    Up,
    /// Lost or refused; tried again every [`RESUBSCRIBE_AFTER`].
    Down,
}

/// What a replica does with a hand-off for a call it holds.
#[async_trait::async_trait]
pub(crate) trait Holder: Send + Sync {
    async fn take(&self, hand: Hand) -> Reply;
}

/// Why a hand-off did not reach its holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RelayError {
    #[error("no replica holds the call: the one that did stopped or lost its Redis connection")]
    HolderGone,
    #[error("the replica holding the call did not reply in time")]
    TimedOut,
    #[error("the shared store (Redis) is unreachable")]
    Unavailable,
}

impl RelayError {
    /// The outcome label a failed hand-off is counted under.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            RelayError::HolderGone => "holder_gone",
            RelayError::TimedOut => "timed_out",
            RelayError::Unavailable => "store_unavailable",
        }
    }

    /// The client's refusal.
    pub(crate) fn refusal(self) -> Refusal {
        match self {
            RelayError::HolderGone | RelayError::TimedOut => Refusal::new(
                Reason::CallHolderGone,
                format!("{self}; the call is lost: start it again"),
            ),
            RelayError::Unavailable => Refusal::new(
                Reason::StateStoreUnavailable,
                "the gateway cannot reach the replica that holds this call (its shared store is unreachable); try again",
            ),
        }
    }
}

/// This instance's end of the relay.
pub(crate) struct Relay {
    url: String,
    instance: String,
    holder: Arc<dyn Holder>,
    /// The keys messages are sealed with: the current generation's.
    keys: ArcSwapOption<StateSettings>,
    publisher: OnceCell<ConnectionManager>,
    /// Whether the channel is subscribed now.
    listening: watch::Sender<Listening>,
    listener: Mutex<Option<AbortHandle>>,
    /// Hand-offs sent, waiting for their replies, by id.
    pending: Mutex<HashMap<String, oneshot::Sender<Reply>>>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(task) = lock(&self.listener).take() {
            task.abort();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The channel every replica listens on too, for what is told to all.
const EVERY_REPLICA: &str = "portcullis:relay:*";

/// The channel of the replica `instance`.
fn channel(instance: &str) -> String {
    format!("portcullis:relay:{instance}")
}

impl Relay {
    /// The relay of `instance` through the Redis at `url`; it listens once
    /// something needs it ([`listen`](Self::listen)).
    pub(crate) fn new(url: &str, instance: &str, holder: Arc<dyn Holder>) -> Arc<Relay> {
        Arc::new(Relay {
            url: url.to_owned(),
            instance: instance.to_owned(),
            holder,
            keys: ArcSwapOption::empty(),
            publisher: OnceCell::new(),
            listening: watch::Sender::new(Listening::Starting),
            listener: Mutex::new(None),
            pending: Mutex::new(HashMap::new()),
        })
    }

    /// Seal and open messages with `state`'s keys from now on (each config
    /// generation's, as it starts).
    pub(crate) fn seal_with(&self, state: &Arc<StateSettings>) {
        self.keys.store(Some(state.clone()));
    }

    /// Whether this relay goes through the Redis at `url` (a reload keeps it).
    pub(crate) fn serves(&self, url: &str) -> bool {
        self.url == url
    }

    /// Listen on this instance's channel: before a call is held, so an
    /// answer reaching another replica finds it. Only the first call waits
    /// (for the first subscription); while Redis is down the answer is at once.
    pub(crate) async fn listen(self: &Arc<Self>) -> Result<(), RelayError> {
        match *self.listening.borrow() {
            Listening::Up => return Ok(()),
            Listening::Down => return Err(RelayError::Unavailable),
            Listening::Starting => {}
        }
        {
            let mut listener = lock(&self.listener);
            if listener.is_none() {
                let task = tokio::spawn(listen_loop(Arc::downgrade(self)));
                *listener = Some(task.abort_handle());
            }
        }
        let mut up = self.listening.subscribe();
        let subscribed = matches!(
            tokio::time::timeout(REDIS_TIMEOUT, up.wait_for(|v| *v != Listening::Starting)).await,
            Ok(Ok(l)) if *l == Listening::Up
        );
        match subscribed {
            true => Ok(()),
            false => Err(RelayError::Unavailable),
        }
    }

    /// Hand `hand` to the replica `to` and wait up to `wait` for its reply.
    pub(crate) async fn hand(
        self: &Arc<Self>,
        to: &str,
        hand: Hand,
        wait: Duration,
    ) -> Result<Reply, RelayError> {
        self.listen().await?;
        let id = crate::mrtr::seal::new_operation_id();
        let envelope = Envelope::Hand {
            id: id.clone(),
            reply_to: channel(&self.instance),
            hand,
        };
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id.clone(), tx);
        let outcome = self.send(to, &envelope, rx, wait).await;
        lock(&self.pending).remove(&id);
        outcome
    }

    async fn send(
        &self,
        to: &str,
        envelope: &Envelope,
        rx: oneshot::Receiver<Reply>,
        wait: Duration,
    ) -> Result<Reply, RelayError> {
        let heard = self.publish(to, envelope).await?;
        if heard == 0 {
            return Err(RelayError::HolderGone);
        }
        match tokio::time::timeout(wait, rx).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(_)) => Err(RelayError::HolderGone),
            Err(_) => Err(RelayError::TimedOut),
        }
    }

    /// Tell every replica (this one too) `hand`, expecting no reply: best
    /// effort, in the background (what it tells ends on its own anyway).
    pub(crate) fn tell(self: &Arc<Self>, hand: Hand) {
        let relay = self.clone();
        tokio::spawn(async move {
            let told = relay
                .publish_on(EVERY_REPLICA, &Envelope::Tell { hand })
                .await;
            if told.is_err() {
                tracing::warn!("relay: a cancellation could not be told to the other replicas");
            }
        });
    }

    /// Publish `envelope` on the channel of `to`: how many listened.
    async fn publish(&self, to: &str, envelope: &Envelope) -> Result<i64, RelayError> {
        self.publish_on(&channel(to), envelope).await
    }

    async fn publish_on(&self, channel: &str, envelope: &Envelope) -> Result<i64, RelayError> {
        let keys = self.keys.load_full().ok_or(RelayError::Unavailable)?;
        let expires = crate::model::SystemClock.now_secs() + SEALED_FOR_SECS;
        let sealed = Sealed { expires, envelope };
        let payload = keys
            .keys
            .seal_as(SEALED_PREFIX, &sealed)
            .ok_or(RelayError::Unavailable)?;
        let mut conn = self.publisher().await?;
        let cmd = redis::cmd("PUBLISH").arg(channel).arg(payload).to_owned();
        match tokio::time::timeout(REDIS_TIMEOUT, cmd.query_async::<i64>(&mut conn)).await {
            Ok(Ok(n)) => Ok(n),
            _ => Err(RelayError::Unavailable),
        }
    }

    async fn publisher(&self) -> Result<ConnectionManager, RelayError> {
        let conn = self
            .publisher
            .get_or_try_init(|| async {
                let client =
                    redis::Client::open(self.url.as_str()).map_err(|_| RelayError::Unavailable)?;
                match tokio::time::timeout(REDIS_TIMEOUT, ConnectionManager::new(client)).await {
                    Ok(Ok(c)) => Ok(c),
                    _ => Err(RelayError::Unavailable),
                }
            })
            .await?;
        Ok(conn.clone())
    }

    /// One message from the channel.
    fn received(self: &Arc<Self>, payload: &[u8]) {
        let Some(envelope) = self.open(payload) else {
            tracing::warn!(
                "relay: a message on this replica's channel not sealed with this cluster's [state] keys, or too old: dropped"
            );
            return;
        };
        match envelope {
            Envelope::Reply { id, reply } => {
                if let Some(waiting) = lock(&self.pending).remove(&id) {
                    let _ = waiting.send(reply);
                }
            }
            Envelope::Tell { hand } => {
                let relay = self.clone();
                tokio::spawn(async move { relay.holder.take(hand).await });
            }
            Envelope::Hand { id, reply_to, hand } => {
                let relay = self.clone();
                tokio::spawn(async move {
                    let reply = relay.holder.take(hand).await;
                    let Some(to) = reply_to.strip_prefix("portcullis:relay:") else {
                        return;
                    };
                    if relay
                        .publish(to, &Envelope::Reply { id, reply })
                        .await
                        .is_err()
                    {
                        tracing::warn!("relay: a reply to a hand-off could not be published");
                    }
                });
            }
        }
    }
}

impl Relay {
    /// A sealed message opened with any of the keys, when not expired.
    fn open(&self, payload: &[u8]) -> Option<Envelope> {
        let keys = self.keys.load_full()?;
        let token = std::str::from_utf8(payload).ok()?;
        let sealed: Sealed<Envelope> = keys.keys.open_as(SEALED_PREFIX, token).ok()?;
        (crate::model::SystemClock.now_secs() <= sealed.expires).then_some(sealed.envelope)
    }
}

/// Subscribe to the channel and read it; subscribed again whenever the
/// connection is lost, until the relay is dropped.
async fn listen_loop(relay: Weak<Relay>) {
    let mut was_down = false;
    loop {
        let Some(url) = relay
            .upgrade()
            .map(|r| (r.url.clone(), channel(&r.instance)))
        else {
            return;
        };
        let (url, name) = url;
        match subscribe(&url, &name).await {
            Ok(pubsub) => {
                if was_down {
                    tracing::info!("relay: subscribed to this replica's channel again");
                }
                let Some(r) = relay.upgrade() else { return };
                r.listening.send_replace(Listening::Up);
                drop(r);
                let mut messages = pubsub.into_on_message();
                while let Some(msg) = messages.next().await {
                    let Some(r) = relay.upgrade() else { return };
                    r.received(msg.get_payload_bytes());
                }
                tracing::warn!(
                    "relay: this replica's channel was lost; answers for its calls cannot reach it from other replicas until it is back"
                );
            }
            Err(_) if !was_down => {
                tracing::warn!(
                    "relay: cannot subscribe to this replica's channel (Redis unreachable)"
                );
            }
            Err(_) => {}
        }
        was_down = true;
        if let Some(r) = relay.upgrade() {
            r.listening.send_replace(Listening::Down);
        }
        tokio::time::sleep(RESUBSCRIBE_AFTER).await;
    }
}

async fn subscribe(url: &str, name: &str) -> Result<redis::aio::PubSub, RelayError> {
    let client = redis::Client::open(url).map_err(|_| RelayError::Unavailable)?;
    let subscribed = async {
        let mut pubsub = client.get_async_pubsub().await?;
        pubsub.subscribe(&[name, EVERY_REPLICA]).await?;
        Ok::<_, redis::RedisError>(pubsub)
    };
    match tokio::time::timeout(REDIS_TIMEOUT, subscribed).await {
        Ok(Ok(p)) => Ok(p),
        _ => Err(RelayError::Unavailable),
    }
}

/// The instance a call id names (see `BridgeCalls::new_call_id`).
pub(crate) fn holder_of(call: &str) -> Option<&str> {
    call.split_once('.').map(|(instance, _)| instance)
}

#[cfg(test)]
mod tests;
