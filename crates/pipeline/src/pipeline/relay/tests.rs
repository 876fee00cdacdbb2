//! The relay against a real `redis-server` (on a unix socket in a folder of
//! the test's own): a hand-off reaches the replica that listens on the
//! channel it names and its reply comes back; one nobody listens for, or one
//! sent while Redis is down, is refused at once. Skipped when redis-server
//! is not installed, unless PORTCULLIS_REQUIRE_PEERS=1.

use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::json;

use super::*;
use crate::mrtr::seal::{new_key_line, StateKeys};
use crate::mrtr::settings::StateSettings;

struct RedisServer {
    child: Child,
    dir: tempfile::TempDir,
}

impl RedisServer {
    fn start() -> Option<RedisServer> {
        let installed = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !installed {
            assert!(
                std::env::var("PORTCULLIS_REQUIRE_PEERS").as_deref() != Ok("1"),
                "redis-server not installed and PORTCULLIS_REQUIRE_PEERS=1"
            );
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("redis.sock");
        let child = Command::new("redis-server")
            .args([
                "--port",
                "0",
                "--save",
                "",
                "--appendonly",
                "no",
                "--unixsocket",
            ])
            .arg(&socket)
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !socket.exists() {
            assert!(Instant::now() < deadline, "redis-server did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(RedisServer { child, dir })
    }

    fn url(&self) -> String {
        format!(
            "redis+unix://{}?db=0",
            self.dir.path().join("redis.sock").display()
        )
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A holder that keeps what it was handed and says it was delivered.
#[derive(Default)]
struct Kept(Mutex<Vec<String>>);

#[async_trait::async_trait]
impl Holder for Arc<Kept> {
    async fn take(&self, hand: Hand) -> Reply {
        let Hand::Answer { call, .. } = hand else {
            return Reply::refused(Refusal::new(Reason::StateInvalid, "a retry"));
        };
        lock(&self.0).push(call);
        Reply::Delivered
    }
}

fn answer(call: &str) -> Hand {
    Hand::Answer {
        call: call.to_owned(),
        session: "s".into(),
        key: "k".into(),
        result: Some(json!({"action": "accept", "content": {"x": 1}})),
        error: None,
    }
}

fn cluster_keys() -> Arc<StateSettings> {
    Arc::new(StateSettings {
        // A key of its own (generated keys are one per process).
        keys: StateKeys::parse(&new_key_line("k1")).expect("a key"),
        max_client_state_bytes: 4096,
        round_timeout: Duration::from_secs(60),
        max_rounds: 3,
        max_operation_time: Duration::from_secs(60),
        max_answer_bytes: 4096,
        allow_secret_values: false,
        replay: crate::mrtr::settings::ReplayBackend::Local,
        session_lifetime: Duration::from_secs(60),
        push_timeout: Duration::from_secs(30),
    })
}

fn relay(url: &str, instance: &str, keys: &Arc<StateSettings>) -> (Arc<Relay>, Arc<Kept>) {
    let kept = Arc::new(Kept::default());
    let relay = Relay::new(url, instance, Arc::new(kept.clone()));
    relay.seal_with(keys);
    (relay, kept)
}

#[tokio::test]
async fn a_hand_off_reaches_the_replica_named_and_its_reply_comes_back() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let keys = cluster_keys();
    let (holder, kept) = relay(&redis.url(), "holder", &keys);
    let (receiver, _) = relay(&redis.url(), "receiver", &keys);
    holder.listen().await.expect("listening");
    let wait = Duration::from_secs(5);
    let reply = receiver.hand("holder", answer("holder.c1"), wait).await;
    assert!(matches!(reply, Ok(Reply::Delivered)), "{reply:?}");
    assert_eq!(*lock(&kept.0), ["holder.c1"]);
    // The holder's refusal comes back as it decided it.
    let retry = Hand::Retry {
        call: "holder.c2".into(),
        principal: "p".into(),
        answer: json!({}),
    };
    let Ok(Reply::Refused { reason, .. }) = receiver.hand("holder", retry, wait).await else {
        panic!("no refusal");
    };
    assert_eq!(reason, "state_invalid");
    assert!(lock(&receiver.pending).is_empty());
}

#[tokio::test]
async fn a_message_not_sealed_with_the_clusters_keys_is_dropped() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (holder, kept) = relay(&redis.url(), "holder", &cluster_keys());
    let (stranger, _) = relay(&redis.url(), "stranger", &cluster_keys());
    holder.listen().await.expect("listening");
    // Plain JSON, as anyone who can write to the Redis could publish it.
    let plain = serde_json::to_vec(&Envelope::Hand {
        id: "1".into(),
        reply_to: channel("stranger"),
        hand: answer("holder.c0"),
    })
    .unwrap();
    let mut c = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let heard: i64 = redis::cmd("PUBLISH")
        .arg(channel("holder"))
        .arg(plain)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(heard, 1);
    // Sealed with other keys: heard, never taken, so never answered.
    let reply = stranger
        .hand("holder", answer("holder.c1"), Duration::from_millis(500))
        .await;
    assert_eq!(reply.err(), Some(RelayError::TimedOut));
    assert!(lock(&kept.0).is_empty());
    // What is sealed can be read by no one without the keys: no form value in clear.
    let sealed = stranger
        .keys
        .load_full()
        .unwrap()
        .keys
        .seal_as(SEALED_PREFIX, &answer("x.y"))
        .unwrap();
    assert!(!sealed.contains("accept") && sealed.starts_with(SEALED_PREFIX));
}

#[tokio::test]
async fn a_hand_off_nobody_listens_for_is_refused_at_once() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (receiver, _) = relay(&redis.url(), "receiver", &cluster_keys());
    let started = Instant::now();
    let gone = receiver
        .hand("stopped", answer("stopped.c1"), Duration::from_secs(30))
        .await;
    assert_eq!(gone.err(), Some(RelayError::HolderGone));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        RelayError::HolderGone.refusal().reason,
        Reason::CallHolderGone
    );
}

#[tokio::test]
async fn a_hand_off_while_redis_is_down_is_refused() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let (receiver, _) = relay(&redis.url(), "receiver", &cluster_keys());
    receiver.listen().await.expect("listening");
    let _ = redis.child.kill();
    let _ = redis.child.wait();
    let started = Instant::now();
    let down = receiver
        .hand("holder", answer("holder.c1"), Duration::from_secs(30))
        .await;
    assert_eq!(down.err(), Some(RelayError::Unavailable));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        RelayError::Unavailable.refusal().reason,
        Reason::StateStoreUnavailable
    );
    // A Redis that never was: refused too, as fast.
    let (nowhere, _) = relay("redis://127.0.0.1:1/0", "nowhere", &cluster_keys());
    let started = Instant::now();
    let down = nowhere
        .hand("holder", answer("holder.c1"), Duration::from_secs(30))
        .await;
    assert_eq!(down.err(), Some(RelayError::Unavailable));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_call_id_names_its_holder() {
    assert_eq!(holder_of("AbC-_9.rest"), Some("AbC-_9"));
    assert_eq!(holder_of("no-instance"), None);
}
